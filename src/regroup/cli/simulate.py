"""``regroup simulate SCENARIO``: run a scenario file (or a bundled scenario by name) in the simulator and
print a readable timeline with the per-rebalance summary, or (``--summary-json``) exactly one JSON
document ``{"rebalances": [...], "violations": [...], "final_assignment": {...}}`` (and ``"share": {...}`` for
a scenario with share members). ``--events FILE`` writes the JSON-lines event log (schema in
docs/simulator.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Final


class SimulateError(Exception):
    """A problem with what the user gave (scenario, seed, output file); one line, exit 2."""


_THIRD_MEMBER = (
    'why eager pauses less than cooperative and KIP-848 here: docs/simulator.md, "Findings and limits", '
    '"A third member joins"'
)
#: bundled scenarios whose results look wrong at first sight, and where they are explained
EXPLAINED: Final = {f"third-member-joins-{p}": _THIRD_MEMBER for p in ("eager", "cooperative", "consumer")}


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "simulate",
        help="run a group scenario in the deterministic simulator",
        description=(
            "Run a scenario file, or a bundled scenario by name (third-member-joins-eager, "
            "third-member-joins-cooperative, ...: docs/simulator.md)."
        ),
    )
    parser.add_argument("scenario", help="scenario JSON file, or the name of a bundled scenario")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the network (default 0)")
    parser.add_argument("--events", metavar="FILE", help="write the JSON-lines event log to FILE")
    parser.add_argument("--summary-json", action="store_true", help="print only the summary, as one JSON document")


def run(args: argparse.Namespace) -> int:
    from regroup.sim import ScenarioError, load, simulate
    from regroup.sim.summary import summarize_rows
    from regroup.sim.timeline import render

    try:
        scenario = load(args.scenario)
    except ScenarioError as exc:
        raise SimulateError(str(exc)) from None
    sim = simulate(scenario, args.seed)
    if args.events:
        try:
            with open(args.events, "w", encoding="utf-8") as fh:
                fh.write(sim.log.text())
        except OSError as exc:
            raise SimulateError(f"cannot write {args.events}: {exc.strerror}") from None
    summary = summarize_rows(sim.log.rows, scenario.measure_from_ms)
    if args.summary_json:
        json.dump(summary.to_json(), sys.stdout, sort_keys=False)
        sys.stdout.write("\n")
    else:
        print(render(sim.log.events, summary, scenario.name, args.seed, scenario.measure_from_ms))
        why = EXPLAINED.get(scenario.name)
        if why is not None:
            print(why)
    return 0
