# heliostat — `make help` lists the targets. Every target works on a fresh
# Debian machine with Go: what the tests need (ClickHouse) is installed here
# when missing and we are root, and the servers are started by the tests.

GO       ?= go
BIN      ?= bin/heliostat
ROWS     ?= 2000000
PKGS     := ./...
# the version stamped into bin/heliostat; empty (outside a git checkout) leaves it to the Go build information
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null)
# make fuzz: how long each fuzz target runs
FUZZTIME ?= 30s
# staticcheck, pinned; `go run` fetches it through the module proxy on first use.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
export GOFLAGS ?= -buildvcs=false
# make install: where (DESTDIR stages the tree for a package)
PREFIX     ?= /usr/local
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system

.PHONY: help build run test test-short deps bench bench-go lint fmt vet fuzz generate install uninstall clean

help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/heliostat, its version (heliostat version, heliostat_build_info) from git describe
	$(GO) build -ldflags "-X github.com/heliostat-dev/heliostat/internal/buildinfo.version=$(VERSION)" -o $(BIN) ./cmd/heliostat

# run needs only ClickHouse, which `heliostat up` installs itself when it is
# missing and it runs as root (or names the package), not what deps installs
# for the tests.
run: build ## run the whole pipeline on the embedded default (Ctrl-C stops it)
	./$(BIN) up

deps: ## install clickhouse-server, Slurm (slurmctld, slurmd, munge; slurmdbd and mariadb-server for accounting), chromium (the report's browser test), systemd (systemd-analyze, for the units' test) and prometheus (promtool and the server, for the alert and dashboard tests; not its node exporter) when missing (Debian, as root); otherwise say what to install
	@missing=""; \
	command -v clickhouse-server >/dev/null 2>&1 || [ -x /usr/bin/clickhouse-server ] || missing="$$missing clickhouse-server clickhouse-client"; \
	command -v slurmctld >/dev/null 2>&1 || [ -x /usr/sbin/slurmctld ] || missing="$$missing slurmctld slurmd slurm-client munge"; \
	command -v slurmdbd >/dev/null 2>&1 || [ -x /usr/sbin/slurmdbd ] || missing="$$missing slurmdbd"; \
	command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing="$$missing mariadb-server"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v systemd-analyze >/dev/null 2>&1 || missing="$$missing systemd"; \
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

test: deps vet ## everything CI checks: vet, unit and integration tests against real ClickHouse and Kafka-protocol servers
	$(GO) test -count=1 -timeout 20m $(PKGS)

test-short: deps ## the tests without the million-sample crash test
	$(GO) test -count=1 -short $(PKGS)

bench: build deps ## end-to-end ingest benchmark (ROWS=2000000) and the Go micro-benchmarks
	./$(BIN) bench ingest --rows $(ROWS) --json
	$(GO) test -run '^$$' -bench . -benchmem ./schemas/ ./ingest/ ./ingest/trace/ ./predictor/...

bench-go: ## Go micro-benchmarks only
	$(GO) test -run '^$$' -bench . -benchmem ./schemas/ ./ingest/ ./ingest/trace/ ./predictor/...

fuzz: ## run every fuzz target for FUZZTIME (30s) each
	@for f in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		pkg=$$(dirname $$f); \
		for t in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | cut -d' ' -f2); do \
			echo "$$pkg $$t"; $(GO) test $$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) || exit 1; \
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
