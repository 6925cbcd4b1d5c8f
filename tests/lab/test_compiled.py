"""The compiled build (``setup.py`` with ``REGROUP_COMPILE=1``: mypyc) imports its native modules and gives the
interpreted package's results exactly: the same event logs and the same lab rows.

The modules are compiled once per test session into a temporary copy of ``src/`` (``build_ext --inplace``
there, never in the repository's ``src/``); a second copy of the same sources stays interpreted. Each side
runs the same check in a subprocess of this interpreter with its copy first on ``sys.path``. Skipped only
when there is no C compiler; without mypy, or when a module does not compile, it fails.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Compiling takes one to three minutes on two cores; the timeout is a guard against a hung compiler only.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

# Runs on both sides; prints one JSON document.
CHECK = r"""
import hashlib, json, sys
from regroup.lab import grid, runner, scenarios
from regroup.sim import bundled_names, load, simulate
from regroup.sim.summary import summarize_rows

MODULES = [
    "regroup.model.cluster", "regroup.records.serde", "regroup.protocol.classic", "regroup.client.classic_member",
    "regroup.client.consumer_member", "regroup.coordinator.coordinator", "regroup.coordinator.consumer.heartbeat",
    "regroup.sim.engine", "regroup.sim.eventlog", "regroup.assignors.base", "regroup.assignors.sticky",
    "regroup.assignors.consumer_protocol", "regroup.assignors.consumer_protocol_kio", "regroup.lab.metrics",
    "regroup.lab.runner", "regroup.lab.jobs",
]


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()


def sim_digest(sim, measure_from_ms=0):
    summary = json.dumps(summarize_rows(sim.log.rows, measure_from_ms).to_json(), sort_keys=True)
    return {"log": digest(sim.log.text()), "events": len(sim.log.events), "violations": list(sim.checker.violations),
            "summary": digest(summary)}


out = {"files": {}, "runs": {}, "scenarios": {}}
for name in MODULES:
    __import__(name)
    out["files"][name] = sys.modules[name].__file__

# The quick grid: for each churn pattern and runnable strategy/protocol pair, its 12-member run of seed 1.
for run in grid.expand(grid.load(sys.argv[1])):
    if run.members == 12 and run.seed == 1:
        sim = simulate(scenarios.scenario(run), run.seed)
        run_row, rebalance_rows = runner.simulate_run(run)
        rows = json.dumps([run_row, rebalance_rows], sort_keys=True, default=repr)
        out["runs"][run.run_id] = {**sim_digest(sim), "rows": digest(rows), "rebalances": len(rebalance_rows)}

# The bundled scenarios, two seeds each.
for name in bundled_names():
    for seed in (0, 1):
        scenario = load(name)
        out["scenarios"][f"{name} seed {seed}"] = sim_digest(simulate(scenario, seed), scenario.measure_from_ms)

# An interpreted plug-in: compiled code must see its class attributes.
from regroup.assignors.base import PartitionAssignor
from regroup.assignors.spec import RebalanceProtocol
from regroup.client.embedded import SubscriptionState, join_protocols


class Plugin(PartitionAssignor):
    name = "plugin"
    supported_protocols = (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)

    def assign(self, spec):
        return {member: {} for member in spec.members}


state = SubscriptionState(
    topics=("t",), owned=frozenset(), generation=-1, previous=frozenset(), previous_generation=-1, rack=None
)
out["plugin"] = [name for name, _ in join_protocols((Plugin(),), state)]
print(json.dumps(out))
"""


def c_compiler() -> str | None:
    """The C compiler setuptools would call, if it is installed."""
    command = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shutil.which(shlex.split(command)[0])


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two copies of the same sources: ``compiled`` (built in place) and ``interpreted``."""
    if c_compiler() is None:
        pytest.skip("no C compiler: the compiled build cannot be checked here")
    base = tmp_path_factory.mktemp("compiled-build")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.so")
    trees = {side: base / side for side in ("interpreted", "compiled")}
    for tree in trees.values():
        shutil.copytree(ROOT / "src", tree / "src", ignore=ignore)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, trees["compiled"] / name)
    shutil.copytree(ROOT / "tools", trees["compiled"] / "tools", ignore=ignore)  # the constructors' generator
    proc = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=trees["compiled"],
        env={**os.environ, "REGROUP_COMPILE": "1"},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"the compiled build failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return {side: tree / "src" for side, tree in trees.items()}


def run_check(src: Path) -> dict[str, Any]:
    path = [str(src), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, str(ROOT / "examples" / "lab" / "quick.yaml")],
        cwd=src.parent,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def interpreted(trees: dict[str, Path]) -> dict[str, Any]:
    return run_check(trees["interpreted"])


@pytest.fixture(scope="module")
def compiled(trees: dict[str, Path]) -> dict[str, Any]:
    return run_check(trees["compiled"])


def test_the_compiled_modules_are_the_ones_imported(trees: dict[str, Path], compiled: dict[str, Any]) -> None:
    for name, file in compiled["files"].items():
        assert Path(file).is_relative_to(trees["compiled"]), (name, file)
        if name == "regroup.assignors.consumer_protocol_kio" or name == "regroup.lab.jobs":
            assert file.endswith(".py"), (name, file)  # left interpreted on purpose
        else:
            assert file.endswith(".so"), (name, file)


def test_the_interpreted_side_is_interpreted(trees: dict[str, Path], interpreted: dict[str, Any]) -> None:
    for name, file in interpreted["files"].items():
        assert Path(file).is_relative_to(trees["interpreted"]) and file.endswith(".py"), (name, file)


def test_event_logs_and_lab_rows_are_identical(interpreted: dict[str, Any], compiled: dict[str, Any]) -> None:
    assert len(interpreted["runs"]) == 18  # 3 churn patterns x 6 runnable strategy/protocol pairs
    assert len(interpreted["scenarios"]) >= 8
    for run_id, expected in interpreted["runs"].items():
        assert expected["rebalances"] > 0 and expected["violations"] == [], run_id
        assert compiled["runs"][run_id] == expected, run_id
    assert compiled["runs"].keys() == interpreted["runs"].keys()
    assert compiled["scenarios"] == interpreted["scenarios"]


def test_an_interpreted_plugin_subclasses_the_compiled_base(compiled: dict[str, Any]) -> None:
    assert compiled["plugin"] == ["plugin"]
