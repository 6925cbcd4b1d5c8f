# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: run test lint typecheck unit soak bench bench-server bench-kip848 bench-lab clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e .
	touch $@

$(DEVSTAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(STAMP)

run: $(STAMP)
	$(BIN)/regroup serve

lint: $(DEVSTAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(DEVSTAMP)
	$(BIN)/mypy src

unit: $(DEVSTAMP)
	$(BIN)/pytest

test: lint typecheck unit

# Many more randomized simulator schedules than CI runs (REGROUP_SOAK_RUNS per protocol).
soak: $(DEVSTAMP)
	REGROUP_SOAK=1 REGROUP_SOAK_RUNS=$${REGROUP_SOAK_RUNS:-500} $(BIN)/pytest tests/property/test_sim_safety.py \
		tests/property/test_sim_safety_kip848.py

bench: $(DEVSTAMP)
	$(BIN)/python bench/assignors.py

# The Kafka-wire server under load: a 1,000-member rebalance and heartbeat throughput (docs/benchmarks.md).
bench-server: $(DEVSTAMP)
	$(BIN)/python bench/server.py

# KIP-848: 10,000-member consumer-group heartbeats on the core and through `regroup serve` (classic as the
# reference), one member joining a 1,000-member group on the server and on the simulator (docs/benchmarks.md).
bench-kip848: $(DEVSTAMP)
	$(BIN)/python bench/kip848.py --sim-members 100,1000 --sim-unchecked

# The rebalance lab on Spark: a 100-run sweep on local[2] and local[1], analyze 10 million events (docs/benchmarks.md).
bench-lab: $(DEVSTAMP)
	$(BIN)/python bench/lab.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
