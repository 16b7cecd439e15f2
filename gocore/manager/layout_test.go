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

// layers orders every package of the module from the foundation up: a
// package imports only packages of lower layers, so the request path
// from bootstrap to reply runs downward; the calls back up (handlers,
// completions, observers) are the ones docs/design.md §4.2 lists, whose
// table copies this one. Only non-test files count. A pattern ending in
// "/..." covers a subtree, except the packages a layer names exactly.
var layers = [][]string{
	// Foundation: types, limits, clocks, wire formats, test helpers.
	{"gocore/abi", "gocore/limit", "gocore/buildinfo", "gocore/failpoint", "gocore/evict", "gocore/trace",
		"gocore/admission", "gocore/ratelog", "gocore/unixsock", "gocore/tier/ssd/layout", "gocore/tenant",
		"proto/...", "hugepages", "internal/..."},
	// OS resources, stores and codecs over the foundation.
	{"gocore/internal/native", "gocore/index", "gocore/tier/ram", "gocore/tier/ssd", "gocore/session", "gocore/identity",
		"gocore/lifecycle", "gocore/transfer", "gocore/catalog", "gocore/profiling", "gocore/kvevents", "gocore/handover", "ebpf", "hugepages/hugepagestest",
		"internal/hosttest"},
	// Engine, peer and operator transports, the transfer requester, leases,
	// copies, discovery indexes.
	{"gocore/channel", "gocore/peer", "gocore/operator", "gocore/transfer/requester", "gocore/discover", "gocore/copier", "gocore/lease"},
	// The bootstrap socket (over channel); the cluster's network side (over peer).
	{"gocore/bootstrap", "gocore/cluster"},
	// The read path and placement (tier imports cluster: the peer tier's fetch).
	{"gocore/tier"},
	{"gocore/ticket"},
	{"gocore/cache"},
	{"gocore/manager"},
	// Tools, harnesses and tests.
	{"cmd/...", "gocore/client", "gocore/pingpong", "test/..."},
}

// layerOf is the index of name's layer in layers, -1 when none lists it.
func layerOf(name string) int {
	for i, l := range layers {
		if slices.Contains(l, name) {
			return i
		}
	}
	for i, l := range layers {
		for _, pat := range l {
			if strings.HasSuffix(pat, "/...") && strings.HasPrefix(name+"/", strings.TrimSuffix(pat, "...")) {
				return i
			}
		}
	}
	return -1
}

func TestEveryImportGoesDownTheLayers(t *testing.T) {
	for _, p := range goList(t, nil, "./...") {
		name := strings.TrimPrefix(p.ImportPath, module)
		from := layerOf(name)
		if from < 0 {
			t.Errorf("package %s is in no layer (add it to layers, and a row to docs/design.md's concept table)", name)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			if to := layerOf(imp); to >= from && !(from == len(layers)-1 && to == from) {
				t.Errorf("%s (layer %d) imports %s (layer %d): an import goes to a lower layer only", name, from, imp, to)
			}
		}
	}
}

// allowed is every library package's imports within the module (the
// tools and tests of the top layer are held by the layers alone). A new
// edge is a design decision: add it here and to docs/design.md's concept
// table.
var allowed = map[string][]string{
	"ebpf":                      {"gocore/limit"},
	"gocore/abi":                {},
	"gocore/bootstrap":          {"gocore/abi", "gocore/channel", "gocore/lifecycle", "gocore/limit", "gocore/ratelog", "gocore/session", "gocore/tenant", "gocore/unixsock", "proto/lifecyclepb"},
	"gocore/buildinfo":          {},
	"gocore/cache":              {"gocore/abi", "gocore/copier", "gocore/failpoint", "gocore/index", "gocore/lease", "gocore/limit", "gocore/peer", "gocore/ratelog", "gocore/session", "gocore/tenant", "gocore/ticket", "gocore/tier", "gocore/tier/ram", "gocore/tier/ssd"},
	"gocore/catalog":            {"gocore/abi", "gocore/limit"},
	"gocore/kvevents":           {"gocore/abi", "gocore/limit", "gocore/unixsock"},
	"gocore/channel":            {"gocore/abi", "gocore/internal/native", "gocore/limit", "gocore/ratelog", "gocore/session"},
	"gocore/client":             {"gocore/internal/native"},
	"gocore/cluster":            {"gocore/abi", "gocore/admission", "gocore/catalog", "gocore/limit", "gocore/peer", "gocore/transfer", "gocore/transfer/requester"},
	"gocore/copier":             {"gocore/abi", "gocore/index", "gocore/internal/native", "gocore/session", "gocore/tier/ram"},
	"gocore/evict":              {},
	"gocore/failpoint":          {},
	"gocore/handover":           {"gocore/unixsock"},
	"gocore/identity":           {"gocore/abi"},
	"gocore/discover":           {"gocore/abi", "gocore/index", "gocore/limit"},
	"gocore/index":              {"gocore/abi", "gocore/evict"},
	"gocore/internal/native":    {"gocore/abi"},
	"gocore/lease":              {"gocore/index"},
	"gocore/lifecycle":          {"proto/lifecyclepb"},
	"gocore/limit":              {},
	"gocore/manager":            {"ebpf", "gocore/abi", "gocore/bootstrap", "gocore/buildinfo", "gocore/cache", "gocore/catalog", "gocore/channel", "gocore/cluster", "gocore/discover", "gocore/failpoint", "gocore/handover", "gocore/index", "gocore/kvevents", "gocore/limit", "gocore/operator", "gocore/peer", "gocore/profiling", "gocore/session", "gocore/tenant", "gocore/tier/ram", "gocore/tier/ssd", "gocore/transfer", "gocore/unixsock", "proto/lifecyclepb", "proto/operatorpb"},
	"gocore/operator":           {"gocore/ratelog", "gocore/unixsock", "proto/operatorpb"},
	"gocore/peer":               {"gocore/abi", "gocore/admission", "gocore/limit", "gocore/ratelog", "gocore/transfer", "proto/peerpb"},
	"gocore/pingpong":           {"gocore/client", "gocore/internal/native"},
	"gocore/profiling":          {"gocore/limit"},
	"gocore/session":            {"gocore/abi", "gocore/failpoint", "gocore/limit", "gocore/ratelog", "gocore/tenant", "hugepages"},
	"gocore/ticket":             {"gocore/abi", "gocore/index", "gocore/lease", "gocore/session", "gocore/tier"},
	"gocore/tier":               {"gocore/abi", "gocore/cluster", "gocore/evict", "gocore/index", "gocore/kvevents", "gocore/limit", "gocore/tier/ram", "gocore/tier/ssd"},
	"gocore/tier/ram":           {"gocore/abi", "gocore/limit", "hugepages"},
	"gocore/tier/ssd":           {"gocore/limit", "gocore/tier/ssd/layout", "gocore/unixsock"},
	"gocore/trace":              {},
	"gocore/transfer":           {"gocore/admission", "gocore/failpoint", "gocore/limit"},
	"hugepages":                 {},
	"hugepages/hugepagestest":   {"hugepages"},
	"gocore/admission":          {},
	"gocore/ratelog":            {},
	"gocore/unixsock":           {},
	"gocore/tenant":             {},
	"gocore/tier/ssd/layout":    {},
	"gocore/transfer/requester": {"gocore/limit", "gocore/transfer"},
}

func TestImportGraphMatchesTheAllowedList(t *testing.T) {
	for _, p := range goList(t, nil, "./...") {
		name := strings.TrimPrefix(p.ImportPath, module)
		if layerOf(name) == len(layers)-1 || strings.HasPrefix(name, "proto/") || strings.HasPrefix(name, "internal/") {
			continue // tools, tests, generated code and test helpers: the layers hold them
		}
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

// Libraries never depend, even through another package, on a tool, a
// harness, a test or a test helper (go list -deps: every package a
// package's build pulls in).
func TestNoLibraryDependsOnToolsOrTests(t *testing.T) {
	for _, p := range goList(t, nil, "-deps", "./gocore/...", "./ebpf/...", "./hugepages") {
		name := strings.TrimPrefix(p.ImportPath, module)
		if !strings.HasPrefix(p.ImportPath, module) || layerOf(name) == len(layers)-1 || strings.HasSuffix(name, "test") {
			continue
		}
		for _, d := range p.Deps {
			if !strings.HasPrefix(d, module) {
				continue
			}
			d = strings.TrimPrefix(d, module)
			if layerOf(d) == len(layers)-1 || strings.HasPrefix(d, "internal/") {
				t.Errorf("%s depends on %s, a tool, test or test helper", name, d)
			}
		}
	}
}

func TestManagerBinaryHasNoTestOrBenchDependencies(t *testing.T) {
	p := goList(t, nil, "./cmd/orbitkv-manager")[0]
	for _, d := range p.Deps {
		for _, bad := range []string{"internal/launch", "internal/sdstub", "internal/fdcheck", "internal/etcdtest", "internal/manpage", "internal/pyroscopetest", "internal/hosttest", "internal/syncbuf", "test/", "cmd/orbitkv-bench", "gocore/client", "gocore/pingpong", "gocore/trace"} {
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

// The operator socket's package (and so orbitkvctl's dial path) links no
// cgo: it shares the socket code of gocore/unixsock, not bootstrap's.
func TestTheOperatorSocketLinksNoCgo(t *testing.T) {
	for _, p := range goList(t, nil, "-deps", "./gocore/operator", "./gocore/unixsock") {
		if p.ImportPath == module+"gocore/internal/native" || len(p.CgoFiles) > 0 && strings.HasPrefix(p.ImportPath, module) {
			t.Errorf("gocore/operator depends on %s, a cgo package", p.ImportPath)
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
