// Command orbitkvctl is the operator's tool for a running orbitkv-manager:
// sessions, stats, health, evict, flush and drain over the Manager's
// operator socket (gocore/operator), ping through a session of its own
// on the bootstrap socket, events from the Manager's KV event stream, and certs, which makes the certificates of the
// Managers' peer control (gocore/peer). Run orbitkvctl --help for the
// commands.
package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/buildinfo"
	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/gocore/operator"
)

// globals are the flags every command takes (before or after its name).
type globals struct {
	socket   string
	opSocket string
	manager  string
	timeout  time.Duration
	output   string
	// managerUID is --manager-uid: "" takes $ORBITKV_MANAGER_UID.
	managerUID string
}

// usageError is a command-line mistake: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// check validates the global flags.
func (g *globals) check() error {
	if g.timeout < time.Millisecond || g.timeout > time.Hour {
		return usagef("--timeout must be between 1ms and 1h (got %v)", g.timeout)
	}
	switch g.output {
	case formatTable, formatJSON, formatYAML:
	default:
		return usagef("--output must be table, json or yaml (got %q)", g.output)
	}
	return nil
}

// runtimeDir is the directory of the default bootstrap socket,
// lifecycle.RuntimeDir; tests point it at a directory of their own.
var runtimeDir = lifecycle.RuntimeDir

// bootstrapSocket is the bootstrap socket's path by the clients' rule
// (lifecycle.ClientSocketPath): --socket, else the path derived from
// --manager, else $ORBITKV_BOOTSTRAP_SOCKET, else /run/orbitkv/manager.sock
// when it is a socket, else the path derived from $ORBITKV_LISTEN or
// 127.0.0.1:7470.
func (g *globals) bootstrapSocket() (lifecycle.ClientSocket, error) {
	cs, err := lifecycle.ClientSocketPath(g.socket, g.manager, os.Getenv, runtimeDir)
	switch {
	case err == nil:
		return cs, nil
	case g.socket != "":
		return cs, usagef("--socket %q: %v", g.socket, err)
	case g.manager != "":
		return cs, usagef("--manager %q: %v", g.manager, err)
	}
	return cs, usagef("%v", err) // the error names the variable
}

// operatorSocket is the operator socket's path: --operator-socket, else
// $ORBITKV_OPERATOR_SOCKET, else the bootstrap socket's path plus
// ".operator" (the Manager's rule); and whom orbitkvctl trusts to serve it
// besides its own uid and root (operator.Trust): the --manager-uid (or
// $ORBITKV_MANAGER_UID) uid, and, only when the path was derived from the
// default socket in the runtime directory, that directory's owner when
// lifecycle.RuntimeDirOwner vouches for it. An explicit path, and the /tmp
// fallback, get no such trust.
func (g *globals) operatorSocket() (string, operator.Trust, error) {
	trust := operator.NoTrust
	uid, err := g.trustedManagerUID()
	if err != nil {
		return "", trust, err
	}
	trust.ManagerUID = uid
	if g.opSocket != "" {
		return g.opSocket, trust, socketLength("--operator-socket", g.opSocket)
	}
	if p := os.Getenv(lifecycle.EnvOperatorSocket); p != "" {
		return p, trust, socketLength(lifecycle.EnvOperatorSocket, p)
	}
	cs, err := g.bootstrapSocket()
	if err != nil {
		return "", trust, err
	}
	if cs.Source == lifecycle.SourceRuntimeDir {
		trust.RuntimeDir = runtimeDir
		trust.VouchedUID = int64(cs.VouchedUID) // -1 when not vouched for
	}
	p := cs.Path + operator.Suffix
	return p, trust, socketLength("the operator socket derived from the bootstrap socket "+strconv.Quote(cs.Path), p)
}

// socketLength refuses a Unix socket path longer than the kernel takes,
// naming where the path came from and the limit (a usage error).
func socketLength(what, path string) error {
	if len(path) > lifecycle.MaxSocketPath {
		return usagef("%s: socket path %q is %d bytes, above the limit of %d for a Unix socket", what, path, len(path), lifecycle.MaxSocketPath)
	}
	return nil
}

// EnvManagerUID names the Manager's uid a client trusts besides its own
// (the clients' manager_uid option; docs/operating.md "Socket paths").
const EnvManagerUID = "ORBITKV_MANAGER_UID"

// trustedManagerUID is --manager-uid, else $ORBITKV_MANAGER_UID, as a uid;
// -1 when neither is given. A value that is not a decimal uid below
// 4294967295 is a usage error naming the flag or the variable.
func (g *globals) trustedManagerUID() (int64, error) {
	v, what := g.managerUID, "--manager-uid"
	if v == "" {
		v, what = os.Getenv(EnvManagerUID), EnvManagerUID
	}
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n == math.MaxUint32 || v[0] == '+' {
		return -1, usagef("%s %q: want the decimal uid of the Manager to trust (0..4294967294)", what, v)
	}
	return int64(n), nil
}

// newRoot builds the command tree writing to stdout and stderr.
func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "orbitkvctl",
		Short: "Inspect, exercise and operate a running orbitkv-manager",
		Long: `orbitkvctl inspects, exercises and operates a running orbitkv-manager.

The bootstrap socket is --socket, else the path derived from --manager, else
$ORBITKV_BOOTSTRAP_SOCKET, else /run/orbitkv/manager.sock when it is a socket
(the systemd unit's), else the path derived from $ORBITKV_LISTEN or
127.0.0.1:7470: the rule of the Manager, liborbitkv and the Python client
(docs/operating.md, "Socket paths").

sessions, stats, namespaces, health, evict, flush, drain, upgrade and version talk to
the Manager's operator
socket (default: $ORBITKV_OPERATOR_SOCKET, else the bootstrap socket's path
plus ".operator"; mode 0600, or
0660 for the Manager's --operator-group), which only root and the operator
group may use (the Manager's uid too with its --operator-admit-manager-uid).
Before sending anything orbitkvctl checks the process serving the operator
socket (SO_PEERCRED) and talks only to its own uid, root, the uid of
--manager-uid (default $ORBITKV_MANAGER_UID) and, for the default socket in
/run/orbitkv, that directory's owner when root vouches for it; anyone else
is refused naming the path, its uid and pid (exit status 1), so a socket
another user created (the /tmp path while /run/orbitkv is missing) is never
talked to. Strings the Manager sends are printed with control characters
escaped. ping opens a session of its own on the
bootstrap socket, as an engine does. events subscribes to the Manager's KV
event stream (--kv-events), whose endpoints it asks the operator socket for
unless --endpoint names one. Every command prints a table, or JSON
with -o json (64-bit integers as strings), or YAML with -o yaml (made from the
JSON: the same field names, 64-bit integers as quoted strings). certs makes
the cluster CA and node certificates of the Managers' peer control; it talks
to no Manager.`,
		Version:       buildinfo.Get().String("orbitkvctl") + fmt.Sprintf("abi: %d, bootstrap protocol %d\n", abi.Version, abi.BootstrapVersion),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return g.check()
		},
		RunE: func(*cobra.Command, []string) error {
			return usagef("no command (want sessions, stats, namespaces, health, evict, flush, drain, upgrade, ping, events, certs, version or completion)")
		},
	}
	root.SetVersionTemplate("{{.Version}}")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&g.socket, "socket", "", "bootstrap socket `path` (default: the path derived from --manager when given, else $ORBITKV_BOOTSTRAP_SOCKET, else /run/orbitkv/manager.sock when it is a socket, else the path derived from $ORBITKV_LISTEN or 127.0.0.1:7470)")
	pf.StringVar(&g.opSocket, "operator-socket", "", "operator socket `path` (default: $ORBITKV_OPERATOR_SOCKET, else the bootstrap socket's path plus .operator)")
	pf.StringVar(&g.manager, "manager", "", "Manager listen `host:port` whose derived path /tmp/orbitkv-HOST-PORT.sock is the bootstrap socket (default: see --socket)")
	pf.StringVar(&g.managerUID, "manager-uid", "", "also trust `UID` as the Manager's uid on the operator socket (default: $ORBITKV_MANAGER_UID; besides orbitkvctl's own uid, root, and the owner of /run/orbitkv for its default socket there)")
	pf.DurationVar(&g.timeout, "timeout", 5*time.Second, "deadline of each call, 1ms..1h")
	pf.StringVarP(&g.output, "output", "o", "table", "output `format`: table, json or yaml")
	root.AddCommand(sessionsCmd(g), statsCmd(g), namespacesCmd(g), healthCmd(g), dropCmd(g, false), dropCmd(g, true), drainCmd(g), upgradeCmd(g),
		pingCmd(g), eventsCmd(g), certsCmd(), versionCmd(g))
	return root
}

func versionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print orbitkvctl's build and the Manager's: version, commit, build date, Go version and the ABI each speaks",
		Long: `version prints orbitkvctl's build (version, commit, build date, Go version, the
ABI and bootstrap protocol it speaks) and then the Manager's, asked on the
operator socket. When the Manager does not answer it prints orbitkvctl's build
and the error, and exits 1 (with -o json or yaml the document carries the
error as server_error). orbitkvctl --version prints orbitkvctl's build alone
and asks no Manager.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return version(g, cmd.OutOrStdout())
		},
	}
}

// noArgs refuses positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s: unexpected argument %q", cmd.Name(), args[0])
	}
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes orbitkvctl and returns the exit status: 0 on success, 2 on a
// usage error, 1 on any other failure.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "orbitkvctl:", err)
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		fmt.Fprintln(stderr, "Run 'orbitkvctl --help' for usage.")
		return 2
	}
	return 1
}

// isCobraUsage recognises the usage errors cobra makes itself (an unknown
// command), which carry no type.
func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts "} {
		if len(s) >= len(p) && s[:len(p)] == p {
			return true
		}
	}
	return false
}
