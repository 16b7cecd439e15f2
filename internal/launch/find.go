package launch

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Find returns the Manager binary: flagValue when it is not "" (not
// checked: starting it reports a bad path), else orbitkv-manager next to
// the running executable, else ./bin/orbitkv-manager. The error names every
// path tried and how to build or name one.
func Find(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	var tried []string
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "orbitkv-manager")
		tried = append(tried, p)
		if isExecutable(p) {
			return p, nil
		}
	}
	p := filepath.Join("bin", "orbitkv-manager")
	tried = append(tried, p)
	if isExecutable(p) {
		return p, nil
	}
	return "", fmt.Errorf("no Manager binary (tried %s); build it (go build -o bin/ ./cmd/...) or pass --manager-bin or --socket",
		strings.Join(tried, ", "))
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// FreeLoopbackAddr returns "127.0.0.1:PORT" with a port that was free a
// moment ago (the kernel's choice for port 0), for a Manager's
// --http-addr: not the default port, which a Manager already running on
// the host may hold.
func FreeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// LastFlagValue returns the value of the last --name (or -name) in args,
// written as "--name value" or "--name=value", as Go's flag package, which
// keeps the last, would see it; ok is false when args do not set it.
func LastFlagValue(args []string, name string) (value string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		switch {
		case a == name && i+1 < len(args):
			value, ok = args[i+1], true
			i++
		case strings.HasPrefix(a, name+"="):
			value, ok = strings.TrimPrefix(a, name+"="), true
		}
	}
	return value, ok
}

// QuoteCommand renders bin and args as a shell-like command line, quoting
// (strconv.Quote) the arguments that are empty or hold white space or
// quotes.
func QuoteCommand(bin string, args []string) string {
	parts := make([]string, 0, len(args)+1)
	for _, a := range append([]string{bin}, args...) {
		if a == "" || strings.ContainsAny(a, " \t\n\"'") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}
