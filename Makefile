# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: run test lint typecheck unit chromium bench-dashboard soak eos-soak fuzz librdkafka-tests bench bench-server bench-security bench-share bench-flood bench-kip848 bench-lab compiled bench-lab-compiled clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[lab]'
	touch $@

$(DEVSTAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev,lab]'
	touch $@ $(STAMP)

run: $(STAMP)
	$(BIN)/regroup serve

lint: $(DEVSTAMP)
	$(BIN)/ruff check src tests bench tools setup.py
	$(BIN)/ruff format --check src tests bench tools setup.py

typecheck: $(DEVSTAMP)
	$(BIN)/mypy src tools

# The dashboard's tests (tests/dashboard) drive Debian's Chromium through Playwright: installed here when it is
# missing and apt-get can run as root; otherwise one line says so and those tests skip, saying what is missing.
CHROMIUM := /usr/bin/chromium
APT_CHROMIUM := DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium

chromium:
	@if [ -x $(CHROMIUM) ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's chromium for tests/dashboard"; \
		$(APT_CHROMIUM) >/dev/null 2>&1 || { apt-get update -q >/dev/null && $(APT_CHROMIUM) >/dev/null; } || \
			echo "chromium: '$(APT_CHROMIUM)' failed; tests/dashboard will fail until $(CHROMIUM) exists"; \
	else \
		echo "chromium: $(CHROMIUM) is missing and this machine cannot install it (needs root and apt-get); tests/dashboard skip"; \
	fi

# The suite on TEST_WORKERS processes (pytest-xdist, one test file per worker at a time), then the latency-bound
# tests (marked serial: stall and flood bounds on a healthy client's round trips) alone, so no other test's load
# is in their numbers. TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2

unit: $(DEVSTAMP) chromium
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile -m "not serial"
	$(BIN)/pytest -m serial

test: lint typecheck unit

# Many more randomized simulator schedules than CI runs (REGROUP_SOAK_RUNS per protocol).
soak: $(DEVSTAMP)
	REGROUP_SOAK=1 REGROUP_SOAK_RUNS=$${REGROUP_SOAK_RUNS:-500} $(BIN)/pytest tests/property/test_sim_safety.py \
		tests/property/test_sim_safety_kip848.py

# Exactly-once consume-transform-produce with the server killed -9 EOS_KILLS times (`make test` kills it once).
EOS_KILLS ?= 10
eos-soak: $(DEVSTAMP)
	REGROUP_EOS_KILLS=$(EOS_KILLS) $(BIN)/pytest -q tests/clients/test_exactly_once.py

# Fuzz `regroup serve` (docs/benchmarks.md): FRAMES mutated frames from SEED over concurrent connections, then the
# edge-value tests with EDGE_EXAMPLES examples per API; non-zero on any finding (frames in fuzz-findings.jsonl).
# `make test` runs 10,000 frames and 20 examples. E.g. make fuzz FRAMES=100000 SEED=7
FRAMES ?= 1000000
SEED ?= 1
EDGE_EXAMPLES ?= 300
fuzz: $(DEVSTAMP)
	@status=0; \
	$(BIN)/python -m tests.server.fuzz --frames $(FRAMES) --seed $(SEED) || status=1; \
	REGROUP_EDGE_EXAMPLES=$(EDGE_EXAMPLES) $(BIN)/pytest -q tests/server/test_edge_values.py || status=1; \
	exit $$status

# librdkafka's own integration tests against `regroup serve`, a fresh server per test, group.protocol classic and
# consumer (docs/compatibility.md; not part of `make test`). Builds librdkafka once (git, a C/C++ compiler, make) in
# $REGROUP_LIBRDKAFKA_CACHE (default ~/.cache/regroup/librdkafka) from $LIBRDKAFKA_GIT at $LIBRDKAFKA_REF.
# E.g. make librdkafka-tests ARGS="--protocol classic --tests 0030,0113"
librdkafka-tests: $(DEVSTAMP)
	$(BIN)/python tests/librdkafka/run.py $(ARGS)

bench: $(DEVSTAMP)
	$(BIN)/python bench/assignors.py

# The Kafka-wire server under load: a 1,000-member rebalance and heartbeat throughput (docs/benchmarks.md).
bench-server: $(DEVSTAMP)
	$(BIN)/python bench/server.py

# What security costs on the server: heartbeats through SASL_SSL against PLAINTEXT, the authorizer with 10,000 ACLs
# against none, connections per second with SASL/SCRAM against plain ones (docs/benchmarks.md); ARGS for options.
bench-security: $(DEVSTAMP)
	$(BIN)/python bench/security.py $(ARGS)

# Share groups against consumer groups: records per second through ShareFetch + ShareAcknowledge against Fetch +
# OffsetCommit for the same records, and the coordinator log's cost per acknowledgement (docs/benchmarks.md);
# ARGS for options.
bench-share: $(DEVSTAMP)
	$(BIN)/python bench/share.py $(ARGS)

# One connection floods the server while a healthy member heartbeats on another (docs/benchmarks.md); compare
# with an older tree through ARGS, e.g. make bench-flood ARGS="--before /tmp/base/src --rounds 2".
bench-flood: $(DEVSTAMP)
	$(BIN)/python bench/flood.py $(ARGS)

# KIP-848: 10,000-member consumer-group heartbeats on the core and through `regroup serve` (classic as the
# reference), one member joining a 1,000-member group on the server and on the simulator (docs/benchmarks.md).
bench-kip848: $(DEVSTAMP)
	$(BIN)/python bench/kip848.py --sim-members 100,1000 --sim-unchecked

# The rebalance lab on Spark: a 100-run sweep on local[2] and local[1], analyze 10 million events (docs/benchmarks.md).
# Options through ARGS, e.g. make bench-lab ARGS="--skip-analyze --runs 200".
bench-lab: $(DEVSTAMP)
	$(BIN)/python bench/lab.py $(ARGS)

# The dashboard's timeline in headless Chromium: a 1,000-member group with 100 rebalances, indexed and drawn (the
# page's budget is 1 s), cooperative and eager histories (docs/operations.md, "The dashboard"); ARGS for options.
bench-dashboard: $(DEVSTAMP) chromium
	$(BIN)/python bench/dashboard.py $(ARGS)

# Optional: the simulator's hot path compiled with mypyc (setup.py, REGROUP_COMPILE=1) into its own venv, installed
# non-editable so the compiled modules live only in that venv's site-packages. Needs a C compiler and Python headers.
CVENV := .venv-compiled
CBIN := $(CVENV)/bin
CSTAMP := $(CVENV)/.installed

$(CBIN)/python:
	$(PYTHON) -m venv $(CVENV)
	$(CBIN)/python -m pip install -q --upgrade pip

$(CSTAMP): $(CBIN)/python pyproject.toml setup.py $(shell find src tools -name '*.py')
	$(CBIN)/python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
		print(*p['dependencies'], *p['optional-dependencies']['lab'], sep='\n')" > $(CVENV)/requirements.txt
	$(CBIN)/pip install -q -r $(CVENV)/requirements.txt 'setuptools>=77' wheel 'mypy>=1.11' 'types-PyYAML>=6.0'
	rm -rf build/lib.* build/bdist.*  # no stale modules from an earlier build in the wheel
	REGROUP_COMPILE=1 $(CBIN)/pip install --no-build-isolation .
	touch $@

compiled: $(CSTAMP)

# The lab benchmark on the compiled build, e.g. make bench-lab-compiled ARGS="--skip-analyze --runs 200".
bench-lab-compiled: $(CSTAMP)
	$(CBIN)/python bench/lab.py $(ARGS)

clean:
	rm -rf $(VENV) $(CVENV) build *.egg-info src/*.egg-info
