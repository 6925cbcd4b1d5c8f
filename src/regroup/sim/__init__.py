"""The deterministic simulator (a shell): virtual clock, event queue, lossy in-memory network, scenario
files, event log, safety checks and the per-rebalance summary. See docs/simulator.md."""

from regroup.sim.engine import Simulator, simulate
from regroup.sim.scenario import Scenario, ScenarioError, bundled_names, load, parse
from regroup.sim.summary import Summary, summarize

__all__ = [
    "Scenario",
    "ScenarioError",
    "Simulator",
    "Summary",
    "bundled_names",
    "load",
    "parse",
    "simulate",
    "summarize",
]
