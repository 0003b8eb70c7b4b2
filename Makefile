# ztls — see README.md.  `make demo` runs the main job, `make test` the tests.
GO        ?= go
PKGS      := ./...
FUZZTIME  ?= 3s
DEB_PKGS  := openssl gnutls-bin bind9 bind9-utils bind9-dnsutils unbound dnsperf redis-server redis-sentinel iproute2 erlang-nox chromium knot knot-dnsutils nsd
# A JDK for the JSSE peer, unless one is on the PATH already.
JDK_PKG   := $(if $(shell command -v javac 2>/dev/null),,default-jdk-headless)
# The interop peers from PyPI and crates.io (tls13/testdata/peers/), pinned.
# tlslite-ng compresses certificates with brotli and zstd (RFC 8879) when the
# PyPI brotli and zstandard packages are importable.
PIP_PEERS := tlslite-ng==0.8.2 kyber-py==1.2.0 zstandard==0.25.0 brotli==1.2.1
# The linter CI runs beside go vet, pinned.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
PEERS_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ztls-peers
# rustup's cargo, when a non-login shell left it off the PATH.
export PATH := $(PATH):$(HOME)/.cargo/bin

.PHONY: all build deps peers demo test test-go lint fuzz fuzz-long bench bench-tls bench-rustls bench-dns-auth bench-dns-auth-cpu bench-dns-resolver bench-turbo testbed-paper testbed-turbo

all: build

# ztls, and ztls-bench (the testbed: 'ztls bench' and 'ztls demo' run it).
build:
	$(GO) build -o bin/ ./cmd/ztls ./cmd/ztls-bench

# Installs the peers the interop tests drive (Debian and PyPI packages, the
# rustls program) and the Go modules.
deps:
	@missing=""; for p in $(DEB_PKGS) $(JDK_PKG); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		else echo "missing Debian packages:$$missing (run 'sudo make deps')"; exit 1; fi; \
	fi
	@frozen="$$(python3 -m pip freeze 2>/dev/null)"; for p in $(PIP_PEERS); do \
		echo "$$frozen" | grep -qix "$$p" || { python3 -m pip install -q --disable-pip-version-check $(PIP_PEERS); break; }; \
	done
	$(GO) mod download
	$(GO) install $(STATICCHECK)
	$(MAKE) --no-print-directory peers

# Builds the rustls peer from crates.io with its Cargo.lock (a minute the first
# time, a second after). Without cargo the rustls interop tests skip.
peers:
	@if command -v cargo >/dev/null 2>&1; then \
		cargo build --locked --release --quiet --manifest-path tls13/testdata/peers/rustls/Cargo.toml \
			--target-dir $(PEERS_DIR)/rustls; \
	else echo "cargo is not installed: the rustls interop tests will skip (install Rust with rustup)"; fi

demo: build
	./bin/ztls demo

# The default test run: unit, known-answer, interop and integration tests, then
# each fuzz target briefly.  Keep it under ~10 minutes.
# CLOCK_AT=MM:SS runs the Go tests with the ztls clock (internal/clock) of
# every test and every process they start reading that minute and second of
# the hour as go test starts (scripts/clock-offset), e.g. CLOCK_AT=59:30 for a
# run that crosses a key rotation 30 s in; unset, the system clock.
test: deps
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory test-go
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME)

# The Go tests alone (no deps, lint or fuzzing), at CLOCK_AT if it is set;
# then the X25519, ML-KEM and P-256 packages once more on their portable path
# (-tags purego: the code a CPU without BMI2/ADX or AVX2 runs).
test-go:
	@if [ -n "$(CLOCK_AT)" ]; then \
		export ZTLS_CLOCK_OFFSET=$$(scripts/clock-offset $(CLOCK_AT)) || exit 2; \
		echo "go test with the ztls clock at xx:$(CLOCK_AT) (ZTLS_CLOCK_OFFSET=$$ZTLS_CLOCK_OFFSET)"; \
	fi; \
	$(GO) test -count=1 -timeout 15m $(PKGS) && \
	$(GO) test -count=1 -tags purego ./tls13/internal/kex/ ./tls13/internal/field25519/ ./tls13/internal/mlkem768/ ./tls13/internal/p256verify/ ./tls13/internal/p256sign/ ./tls13/internal/sig/

# go vet and staticcheck (installed by deps into $(go env GOPATH)/bin).
lint:
	$(GO) vet $(PKGS)
	"$$($(GO) env GOPATH)/bin/staticcheck" $(PKGS)

# Runs every native fuzz target for FUZZTIME each.  Go 1.26's fuzz
# coordinator can report a bare "context deadline exceeded" at the end of
# -fuzztime on a loaded machine (go.dev/issue/75804, fixed in Go 1.27): a
# target that fails that way without writing a failing input runs once more;
# any real finding fails at once.
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
			for try in 1 2; do \
				if $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg >/tmp/ztls-fuzz.log 2>&1; then break; fi; \
				if [ $$try = 1 ] && grep -q 'context deadline exceeded' /tmp/ztls-fuzz.log && ! grep -q 'Failing input written' /tmp/ztls-fuzz.log; then \
					echo "  (Go fuzz coordinator deadline race, go.dev/issue/75804, no failing input: running it again)"; continue; fi; \
				cat /tmp/ztls-fuzz.log; exit 1; \
			done; \
		done; \
	done; echo "fuzz: all targets ran"

fuzz-long:
	$(MAKE) fuzz FUZZTIME=5m

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The figures in docs/: each target regenerates one page's table.
bench-tls:
	sh scripts/bench-tls.sh

# bench-tls with rustls beside ztls and crypto/tls: builds bench/rustls from
# crates.io with its Cargo.lock (needs cargo; minutes the first time).
bench-rustls:
	cargo build --locked --release --quiet --manifest-path bench/rustls/Cargo.toml --target-dir $(PEERS_DIR)/rustls-bench
	RUSTLS_BENCH=$(PEERS_DIR)/rustls-bench/release/ztls-rustls-bench sh scripts/bench-tls.sh

bench-dns-auth:
	sh scripts/bench-dns-auth.sh

# The authority against BIND 9, Knot DNS and NSD per query and per server
# CPU-second (servers on CPU 0, dnsperf on the others; about 10 minutes).
bench-dns-auth-cpu:
	sh scripts/bench-dns-auth-cpu.sh

# Idle DoT connections up to the 20 000 descriptors of one process, with
# resident memory per connection and query latency meanwhile (about a minute).
.PHONY: measure-dns-scale
measure-dns-scale:
	ZTLS_SCALE_MEASURE=1 $(GO) test -count=1 -timeout 20m -run '^TestMeasureIdleDoTScale$$' -v ./dns/authority/

bench-dns-resolver:
	sh scripts/bench-dns-resolver.sh

# The soak (docs/soak.md; not part of make test): three `ztls serve` of one
# fleet, Redis and the authority on loopback under ZTLS and BFE-ZTLS load for
# SOAK_PERIODS key periods of a clock running SOAK_RATE times as fast (15 at
# 30: about 31 minutes), members SIGKILLed and Redis restarted meanwhile,
# every first flight replayed to every member; it fails if early data is
# accepted twice, and writes its report to SOAK_REPORT.
SOAK_PERIODS ?= 15
SOAK_RATE    ?= 30
SOAK_REPORT  ?= /tmp/ztls-soak-report.txt
.PHONY: soak
soak:
	ZTLS_SOAK=1 ZTLS_SOAK_PERIODS=$(SOAK_PERIODS) ZTLS_SOAK_RATE=$(SOAK_RATE) ZTLS_SOAK_REPORT=$(SOAK_REPORT) \
		$(GO) test -count=1 -timeout 0 -run '^TestSoak$$' -v ./cmd/ztls/

# The testbed at the paper's RTTs (needs root; several minutes).
testbed-paper: build
	./bin/ztls bench --rtt paper --runs 20 --scenario stub,local-warm,public-cold \
		--protocols tls,ztls,gotls,openssl,tls-0rtt,quic,quic-0rtt,turbo,ztls-turbo \
		--json --plot docs/testbed > docs/testbed/results.json
	python3 scripts/table3.py docs/testbed/results.json

bench-turbo:
	$(GO) test -run '^$$' -bench 'Throughput|SpoofedFlood' -benchtime 1x ./turbo

# TurboTLS on the testbed at the paper's RTTs with UDP loss and UDP blocked (the
# loss-free turbo and ztls-turbo run with Table 3: make testbed-paper).
testbed-turbo: build
	./bin/ztls bench --rtt paper --runs 20 --protocols tls,turbo-udploss1,turbo-udploss5,turbo-udpblocked,ztls-turbo-udploss1,ztls-turbo-udploss5,ztls-turbo-udpblocked --json > docs/testbed/turbo-udploss.json
