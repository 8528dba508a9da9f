# heliostat — `make help` lists the targets. Every target works on a fresh
# Debian machine with Go: what the tests need (ClickHouse) is installed here
# when missing and we are root, and the servers are started by the tests.

GO       ?= go
BIN      ?= bin/heliostat
ROWS     ?= 2000000
PKGS     := ./...
# the version stamped into bin/heliostat; empty (outside a git checkout) leaves it to the Go build information
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null)
# make fuzz: how long each fuzz target runs, and the longest it minimizes one
# input (Go's default, 60s, can spend a whole FUZZTIME minimizing a new
# interesting input of a large seed, and the target then fails with "context
# deadline exceeded": FuzzDecodeSinfo did, at 6 executions)
FUZZTIME ?= 30s
FUZZMINIMIZETIME ?= 5s
# staticcheck, pinned; `go run` fetches it through the module proxy on first use.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
export GOFLAGS ?= -buildvcs=false
# make test's second pass: the packages that query ClickHouse run again on a
# current ClickHouse, chDB's libchdb.so (ClickHouse as a library, from npm),
# fetched once into CHDB_DIR and checked against its published SHA-512.
CHDB_VERSION ?= 26.7.3-stable.1
CHDB_SHA512  ?= 5cff7b98caa7739b59a4a432c11f0dedc2d3b073624e61ebdf4a42e66ce8de35a6ba48ca9f62016bad1cd81fe059435cb858ce3235a8a2b408082a81563e70a7
CHDB_DIR     ?= $(HOME)/.cache/heliostat/chdb-$(CHDB_VERSION)
CHDB_LIB     := $(CHDB_DIR)/libchdb.so
# make test: how many test packages run at once in each pass (go test -p;
# its default is the number of CPUs). Most of the packages' time is spent
# waiting on the servers they start (Slurm, ClickHouse), not computing: on
# 2 cores the default left the CPUs half idle and CI took 751 s; 4 and 3
# took it to 546 s, with every package passing.
TESTP         ?= 4
TESTP_CURRENT ?= 3
CHDB_PKGS    := ./schemas/... ./analytics/... ./dashboards ./ingest ./predictor/live ./actuator/api ./actuator/audit ./actuator/demandlog ./actuator/loop ./collector/sim ./internal/retention ./cmd/heliostat
# make install: where (DESTDIR stages the tree for a package)
PREFIX     ?= /usr/local
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system

.PHONY: help build run test test-short test-race test-current deps chdb bench bench-go lint fmt vet fuzz generate install uninstall clean

help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/heliostat, its version (heliostat version, heliostat_build_info) from git describe
	$(GO) build -ldflags "-X github.com/heliostat-dev/heliostat/internal/buildinfo.version=$(VERSION)" -o $(BIN) ./cmd/heliostat

# run needs only ClickHouse, which `heliostat up` installs itself when it is
# missing and it runs as root (or names the package), not what deps installs
# for the tests.
run: build ## run the whole pipeline on the embedded default (Ctrl-C stops it)
	./$(BIN) up

deps: ## install clickhouse-server, Slurm (slurmctld, slurmd, munge; slurmdbd and mariadb-server for accounting), chromium (the report's browser test), systemd (systemd-analyze, for the units' test), curl (make chdb) and prometheus (promtool and the server, for the alert and dashboard tests; not its node exporter) when missing (Debian, as root); otherwise say what to install
	@missing=""; \
	command -v clickhouse-server >/dev/null 2>&1 || [ -x /usr/bin/clickhouse-server ] || missing="$$missing clickhouse-server clickhouse-client"; \
	command -v slurmctld >/dev/null 2>&1 || [ -x /usr/sbin/slurmctld ] || missing="$$missing slurmctld slurmd slurm-client munge"; \
	command -v slurmdbd >/dev/null 2>&1 || [ -x /usr/sbin/slurmdbd ] || missing="$$missing slurmdbd"; \
	command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing="$$missing mariadb-server"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v systemd-analyze >/dev/null 2>&1 || missing="$$missing systemd"; \
	command -v curl >/dev/null 2>&1 || missing="$$missing curl"; \
	norec=""; command -v promtool >/dev/null 2>&1 || norec="prometheus"; \
	if [ -z "$$missing$$norec" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing$$missing $$norec (Debian)"; \
		apt-get update -qq && \
		if [ -n "$$missing" ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi && \
		if [ -n "$$norec" ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$norec >/dev/null; fi; \
	else \
		echo "missing:$$missing $$norec — run 'sudo apt-get install$$missing $$norec'" >&2; exit 1; \
	fi

test: deps vet chdb ## everything CI checks: vet, unit and integration tests against real ClickHouse (Debian's 18.16, then a current release for the packages that query it) and Kafka-protocol servers
	HELIOSTAT_CHDB_LIB=$(CHDB_LIB) $(GO) test -p $(TESTP) -count=1 -timeout 20m $(PKGS)
	@$(MAKE) --no-print-directory test-current

test-current: chdb ## the packages that query ClickHouse, on a current ClickHouse (chDB, in the test process, over HTTP)
	@if [ "$$(uname -m)" != x86_64 ]; then echo "test-current: chDB's library is fetched for x86_64 only; skipped on $$(uname -m)"; exit 0; fi; \
	echo "HELIOSTAT_TEST_CLICKHOUSE=chdb: $(CHDB_PKGS)"; \
	HELIOSTAT_CHDB_LIB=$(CHDB_LIB) HELIOSTAT_TEST_CLICKHOUSE=chdb $(GO) test -p $(TESTP_CURRENT) -count=1 -timeout 10m $(CHDB_PKGS)

chdb: ## fetch chDB's libchdb.so (a current ClickHouse as a library, x86_64) into CHDB_DIR for the tests
	@if [ "$$(uname -m)" != x86_64 ] || [ -f $(CHDB_LIB) ]; then exit 0; fi; \
	set -e; mkdir -p $(CHDB_DIR); tgz=$(CHDB_DIR)/lib.tgz.part; \
	echo "fetching chDB $(CHDB_VERSION) (178 MB) into $(CHDB_DIR)"; \
	curl -fsSL --retry 3 -o $$tgz https://registry.npmjs.org/@chdb/lib-linux-x64-gnu/-/lib-linux-x64-gnu-$(CHDB_VERSION).tgz; \
	echo "$(CHDB_SHA512)  $$tgz" | sha512sum -c --quiet || { echo "chdb: $$tgz does not match its SHA-512" >&2; rm -f $$tgz; exit 1; }; \
	tar -xzf $$tgz -C $(CHDB_DIR) --strip-components=1 package/libchdb.so; rm -f $$tgz

# The packages whose goroutines run beside each other (publishers, spools,
# pollers, the control loop, ingest's pipelined flush, the API), checked
# race-free on 2026-11-25.
RACE_PKGS := ./collector ./collector/publish ./collector/spool ./collector/nvml ./collector/attrib ./collector/sim ./collector/slurm \
	./actuator/api ./actuator/adapter ./actuator/loop ./actuator/audit ./actuator/demandlog ./actuator/slurmadapter \
	./ingest ./predictor/live ./analytics ./internal/...

test-race: deps ## the concurrent packages' tests under the race detector (about 9 minutes on 2 cores; not part of make test)
	$(GO) test -race -p 2 -count=1 -timeout 20m $(RACE_PKGS)

test-short: deps ## the tests without the million-sample crash test
	$(GO) test -count=1 -short $(PKGS)

bench: build deps ## end-to-end ingest benchmark (ROWS=2000000) and the Go micro-benchmarks
	./$(BIN) bench ingest --rows $(ROWS) --json
	$(GO) test -run '^$$' -bench . -benchmem ./schemas/ ./ingest/ ./ingest/trace/ ./predictor/...

bench-go: ## Go micro-benchmarks only
	$(GO) test -run '^$$' -bench . -benchmem ./schemas/ ./ingest/ ./ingest/trace/ ./predictor/...

fuzz: ## run every fuzz target for FUZZTIME (30s) each, minimizing an input for at most FUZZMINIMIZETIME (5s)
	@for f in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		pkg=$$(dirname $$f); \
		for t in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | cut -d' ' -f2); do \
			echo "$$pkg $$t"; $(GO) test $$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) || exit 1; \
		done; \
	done

vet: ## go vet
	$(GO) vet $(PKGS)

lint: vet ## gofmt check, vet and staticcheck
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) $(PKGS)

fmt: ## gofmt the tree
	gofmt -w .

generate: ## regenerate golden test vectors (review the diff)
	$(GO) test ./schemas/ -run TestGolden -update

install: build ## install bin/heliostat to $(PREFIX)/bin, the systemd units to $(UNITDIR), $(SYSCONFDIR)/heliostat/heliostat.env (an existing one is kept), the alert rules, scrape jobs and Grafana dashboards to $(PREFIX)/share/heliostat; DESTDIR stages it elsewhere
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/heliostat \
		$(DESTDIR)$(PREFIX)/share/heliostat/prometheus $(DESTDIR)$(PREFIX)/share/heliostat/grafana/provisioning
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/heliostat
	for u in deploy/systemd/*.service; do \
		sed -e 's|/usr/local/bin/heliostat|$(PREFIX)/bin/heliostat|g' -e 's|/etc/heliostat/|$(SYSCONFDIR)/heliostat/|g' $$u > $(DESTDIR)$(UNITDIR)/$$(basename $$u).tmp && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$(basename $$u).tmp && mv $(DESTDIR)$(UNITDIR)/$$(basename $$u).tmp $(DESTDIR)$(UNITDIR)/$$(basename $$u) || exit 1; \
	done
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/heliostat/heliostat.env ]; then \
		echo "kept $(DESTDIR)$(SYSCONFDIR)/heliostat/heliostat.env (the shipped one is deploy/systemd/heliostat.env)"; \
	else \
		install -m 0644 deploy/systemd/heliostat.env $(DESTDIR)$(SYSCONFDIR)/heliostat/heliostat.env; \
	fi
	install -m 0644 dashboards/alerts.yaml deploy/prometheus/scrape.yaml $(DESTDIR)$(PREFIX)/share/heliostat/prometheus/
	install -m 0644 dashboards/*.json $(DESTDIR)$(PREFIX)/share/heliostat/grafana/
	install -m 0644 dashboards/provisioning/*.yaml $(DESTDIR)$(PREFIX)/share/heliostat/grafana/provisioning/
	@echo "installed heliostat $(VERSION) under $(DESTDIR)$(PREFIX); next (docs/OPERATIONS.md, Deploying): useradd --system heliostat," \
		"edit $(SYSCONFDIR)/heliostat/heliostat.env, systemctl daemon-reload, systemctl enable --now the host's units"

uninstall: ## remove what make install installed, except $(SYSCONFDIR)/heliostat/heliostat.env (stop and disable the units first)
	rm -f $(DESTDIR)$(PREFIX)/bin/heliostat
	for u in deploy/systemd/*.service; do rm -f $(DESTDIR)$(UNITDIR)/$$(basename $$u); done
	rm -rf $(DESTDIR)$(PREFIX)/share/heliostat

clean: ## remove build output (not the data directory of `make run`)
	rm -rf bin
