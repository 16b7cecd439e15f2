package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orbitkv/orbitkv/gocore/evict"
	"github.com/orbitkv/orbitkv/gocore/limit"
)

const long = `orbitkv-manager: the OrbitKV node-local KV-cache Manager.

Inference processes on this host connect through a Unix socket (mode 0600
and this uid only; with --tenant, 0666 and the tenants' processes, each
admitted by its kernel credentials), receive a sealed shared-memory slot, an
eventfd and the doorbell, and then exchange fixed 64-byte messages with the
Manager.

Settings come from flags, environment variables and a TOML config file,
in that precedence, over the defaults. Every flag below except --config,
--print-config, --check and --version is also a config key of the same name
(ram-capacity = "64GiB") and an environment variable: ORBITKV_ and the name
in upper case with underscores (ORBITKV_RAM_CAPACITY=64GiB). --config FILE
or ORBITKV_CONFIG names the file; a key the Manager does not know is an
error that names its line.
--print-config shows the effective settings and where each came from; --check
also runs every start-time check of the host without starting.

The bootstrap socket without --bootstrap-socket: $RUNTIME_DIRECTORY/manager.sock
(systemd's RuntimeDirectory=orbitkv), else /run/orbitkv/manager.sock when
/run/orbitkv is a directory owned by this user, else /tmp/orbitkv-HOST-PORT.sock
of --listen. Clients and orbitkvctl look for /run/orbitkv/manager.sock the same
way (docs/operating.md, "Socket paths").

Units: ` + limit.SizeRule + `
A duration has a unit: 50us, 5s, 1m. A count is a whole number.

A setting that is wrong, or a start the host refuses, ends the command with
one line per fault on stderr, "orbitkv-manager: SETTING VALUE: WHAT: LIMIT
OR FIX", and (once logging is up) the same text in an ERROR log line.

` + exitStatusHelp

const examples = `  orbitkv-manager                                    # socket /run/orbitkv/manager.sock if that directory is this user's, else /tmp/orbitkv-127.0.0.1-7470.sock
  orbitkv-manager --poll-mode spin                   # lowest latency, one core busy
  orbitkv-manager --ram-capacity 64GiB --copy-workers 8
  orbitkv-manager --bootstrap-socket /run/okv.sock --http-addr ""
  orbitkv-manager --config /etc/orbitkv/manager.toml --print-config
  orbitkv-manager --config /etc/orbitkv/manager.toml --check   # preflight: exit 0 when the start would pass its checks
  ORBITKV_RAM_CAPACITY=16GiB orbitkv-manager --ssd-dir /var/lib/orbitkv --ssd-create-dir`

// newRoot is the orbitkv-manager command with its flags bound to o.c and
// the completion subcommand; main sets RunE.
func newRoot(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:           "orbitkv-manager [flags]",
		Short:         "The OrbitKV node-local KV-cache Manager",
		Long:          long,
		Example:       examples,
		Args:          strayArgs,
		SilenceErrors: true, // main prints errors, one line each
		SilenceUsage:  true,
		// The Manager's flags are the root's own: a subcommand
		// (completion) takes none of them.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		DisableAutoGenTag: true, // the man pages in docs/man/ stay the same from build to build
	}
	o.fs = root.Flags()
	defineFlags(o.fs, o.c)
	// Flag help wrapped at 100 columns, each continuation under its text.
	root.SetUsageTemplate(strings.ReplaceAll(root.UsageTemplate(), "Flags.FlagUsages", "Flags.FlagUsagesWrapped 100"))
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return flagError(cmd, err) })
	for name, values := range map[string][]string{
		"poll-mode": {"spin", "adaptive", "park"}, "hugepages": {"require", "prefer", "off"},
		"channel-transport": {"shm", "iceoryx2"},
		"eviction":          evict.Names(), "ssd-admission": {"all", "second-hit"},
		"log-level": {"debug", "info", "warn", "error"}, "log-format": {"text", "json"},
	} {
		must(root.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)))
	}
	must(root.MarkFlagDirname("ssd-dir"))
	must(root.MarkFlagFilename("config", "toml"))
	root.AddCommand(completionCommand())
	return root
}

// must panics on an error that only a mistake in newRoot can cause.
func must(err error) {
	if err != nil {
		panic(err)
	}
}

// strayArgs refuses positional arguments: the Manager takes flags only.
func strayArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q (flags start with --; the only subcommand is completion)", args[0])
	}
	return nil
}

// flagError adds the hint a Go-flag habit needs: long flags take two
// dashes here (-ram-capacity reads as the shorthands r, a, m, ...).
func flagError(cmd *cobra.Command, err error) error {
	if strings.HasPrefix(err.Error(), "unknown shorthand flag") {
		return fmt.Errorf("%w (long flags start with --, as in --ram-capacity)", err)
	}
	// pflag: invalid argument "V" for "--name" flag: ... → the flag, the
	// value and its limit, as every other refusal reads.
	if m := invalidArgument.FindStringSubmatch(err.Error()); m != nil {
		if f := cmd.Flags().Lookup(m[2]); f != nil {
			return fmt.Errorf("--%s %s: %s", m[2], m[1], want(f))
		}
	}
	return err
}

// invalidArgument matches pflag's error for a value that does not parse.
var invalidArgument = regexp.MustCompile(`^invalid argument ("[^"]*") for "--([a-z0-9-]+)" flag`)

// completionCommand writes a shell completion script.
func completionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Write the shell completion script of orbitkv-manager",
		Long: `Write the shell completion script of orbitkv-manager for bash, zsh or fish
to standard output. It completes the flags, their fixed values (--poll-mode,
--hugepages, --eviction, ...) and directories for --ssd-dir.`,
		Example: `  source <(orbitkv-manager completion bash)
  orbitkv-manager completion bash > /etc/bash_completion.d/orbitkv-manager
  orbitkv-manager completion zsh > "${fpath[1]}/_orbitkv-manager"
  orbitkv-manager completion fish > ~/.config/fish/completions/orbitkv-manager.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			}
			return root.GenFishCompletion(out, true)
		},
	}
}
