package manager_test

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The layout tests keep the architecture docs/design.md's concept table
// describes (the tailscale "deptest" habit): they read the import graph
// with `go list` and fail on an edge the table does not allow.

const module = "github.com/orbitkv/orbitkv/"

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
	CgoFiles   []string
}

func goList(t *testing.T, env []string, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// allowed is every gocore package's imports within the module. A new edge
// is a design decision: add it here and to docs/design.md's concept table.
var allowed = map[string][]string{
	"gocore/abi":             {},
	"gocore/bootstrap":       {"gocore/abi", "gocore/channel", "gocore/lifecycle", "gocore/limit", "gocore/ratelog", "gocore/session", "gocore/unixsock", "proto/lifecyclepb"},
	"gocore/buildinfo":       {},
	"gocore/cache":           {"gocore/abi", "gocore/copier", "gocore/failpoint", "gocore/index", "gocore/lease", "gocore/limit", "gocore/session", "gocore/ticket", "gocore/tier", "gocore/tier/ram", "gocore/tier/ssd"},
	"gocore/catalog":         {"gocore/abi", "gocore/limit"},
	"gocore/channel":         {"gocore/abi", "gocore/internal/native", "gocore/limit", "gocore/ratelog", "gocore/session"},
	"gocore/client":          {"gocore/internal/native"},
	"gocore/copier":          {"gocore/abi", "gocore/index", "gocore/internal/native", "gocore/session", "gocore/tier/ram"},
	"gocore/evict":           {},
	"gocore/failpoint":       {},
	"gocore/identity":        {"gocore/abi"},
	"gocore/discover":        {"gocore/abi", "gocore/index", "gocore/limit"},
	"gocore/index":           {"gocore/abi", "gocore/evict"},
	"gocore/internal/native": {"gocore/abi"},
	"gocore/lease":           {"gocore/abi", "gocore/index", "gocore/tier"},
	"gocore/lifecycle":       {"proto/lifecyclepb"},
	"gocore/limit":           {},
	"gocore/manager":         {"ebpf", "gocore/abi", "gocore/bootstrap", "gocore/buildinfo", "gocore/cache", "gocore/catalog", "gocore/channel", "gocore/discover", "gocore/failpoint", "gocore/limit", "gocore/operator", "gocore/peer", "gocore/profiling", "gocore/session", "gocore/tier", "gocore/transfer", "gocore/transfer/requester", "proto/lifecyclepb", "proto/operatorpb"},
	"gocore/operator":        {"gocore/ratelog", "gocore/unixsock", "proto/operatorpb"},
	"gocore/peer":            {"gocore/abi", "gocore/admission", "gocore/limit", "gocore/ratelog", "gocore/transfer", "proto/peerpb"},
	"gocore/pingpong":        {"gocore/client", "gocore/internal/native"},
	"gocore/profiling":       {"gocore/limit"},
	"gocore/session":         {"gocore/abi", "gocore/failpoint", "gocore/limit", "gocore/ratelog"},
	"gocore/ticket":          {"gocore/abi", "gocore/index", "gocore/lease", "gocore/session", "gocore/tier"},
	"gocore/tier":            {"gocore/abi", "gocore/evict", "gocore/index", "gocore/limit", "gocore/tier/ram", "gocore/tier/ssd"},
	"gocore/tier/ram":        {"gocore/limit", "hugepages"},
	"gocore/tier/ssd":        {"gocore/limit", "gocore/tier/ssd/layout"},
	"gocore/trace":           {},
	"gocore/transfer":        {"gocore/admission", "gocore/failpoint", "gocore/limit"},

	// Leaves that several packages above share (the standard library only),
	// and the halves of packages split along a seam.
	"gocore/admission":          {},
	"gocore/ratelog":            {},
	"gocore/unixsock":           {},
	"gocore/tier/ssd/layout":    {},
	"gocore/transfer/requester": {"gocore/limit", "gocore/transfer"},
}

func TestImportGraphMatchesTheAllowedList(t *testing.T) {
	for _, p := range goList(t, nil, "./gocore/...") {
		name := strings.TrimPrefix(p.ImportPath, module)
		want, ok := allowed[name]
		if !ok {
			t.Errorf("package %s is not in the allowed list (add it, and a row to docs/design.md's concept table)", name)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			if imp = strings.TrimPrefix(imp, module); !slices.Contains(want, imp) {
				t.Errorf("%s imports %s, which the allowed list does not permit", name, imp)
			}
		}
	}
}

func TestManagerBinaryHasNoTestOrBenchDependencies(t *testing.T) {
	p := goList(t, nil, "./cmd/orbitkv-manager")[0]
	for _, d := range p.Deps {
		for _, bad := range []string{"internal/launch", "internal/fdcheck", "internal/etcdtest", "internal/manpage", "internal/pyroscopetest", "test/", "cmd/orbitkv-bench", "gocore/pingpong", "gocore/trace"} {
			if strings.HasPrefix(d, module+bad) {
				t.Errorf("orbitkv-manager depends on %s, a test- or bench-only package", d)
			}
		}
		// The catalog is an etcd client; etcd servers run only in tests
		// (internal/etcdtest) and in the demo's own etcd.
		if strings.HasPrefix(d, "go.etcd.io/etcd/server/") {
			t.Errorf("orbitkv-manager depends on %s: the Manager links the etcd client only", d)
		}
	}
}

func TestOnlyTheNativePackageHasCgoFiles(t *testing.T) {
	for _, p := range goList(t, nil, "./...") {
		if len(p.CgoFiles) > 0 && p.ImportPath != module+"gocore/internal/native" {
			t.Errorf("%s has cgo files %v: the C boundary is gocore/internal/native only", p.ImportPath, p.CgoFiles)
		}
	}
}

func TestEverythingBuildsWithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the module once more")
	}
	cmd := exec.Command("go", "build", "-o", os.DevNull, "./...")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./...: %v\n%s", err, out)
	}
}
