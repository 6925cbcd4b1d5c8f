"""``regroup assign`` end to end on S2: JSON in, the assignment, the metrics, JSON out.

Usage::

    .venv/bin/python bench/assign_cli.py [--strategy sticky] [--runs 3] [--input /tmp/regroup-s2-sticky.json]
    .venv/bin/python bench/assign_cli.py --profile /tmp/s2.prof     # cProfile one run, in this process
    .venv/bin/python bench/assign_cli.py --src /tmp/before/src      # another checkout's sources (git archive)

S2 is ``bench/assignors.py``'s case: 2,000 members subscribed to 200 topics x 5,000 partitions, S1's own
result (same strategy) as the previous assignment (``owned`` + ``generation`` 1), ``consumer-00000`` gone.
The input file (about 18 MB) is written once per strategy and reused while it exists (``--rebuild`` writes it
again). Each run is ``regroup assign --strategy S --input FILE`` in a fresh process with its output written
to a file; the wall clock from start to exit is reported, best and median of ``--runs``. Run nothing else
CPU-heavy alongside.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import assignors as cases
from regroup.assignors import registry
from regroup.assignors.spec import Assignment


def s2_document(strategy: str) -> dict[str, Any]:
    """S2's input document for ``regroup assign``: S1 assigned by ``strategy``, then one member gone."""
    s1 = cases.CASE_BY_KEY["S1"]
    s2 = cases.CASE_BY_KEY["S2"]
    assert s2.change is not None and s2.change.kind == "leave"
    fresh = cases.fresh_spec(s1.topology)
    assignor = registry.get(strategy)
    previous: Assignment = assignor.assign(assignor.with_previous(fresh))
    members: dict[str, Any] = {}
    for member, sub in fresh.members.items():
        if member == s2.change.member:
            continue
        entry: dict[str, Any] = {"topics": list(sub.topics)}
        owned = {t: ps for t, ps in previous.get(member, {}).items() if ps}
        if owned:
            entry["owned"] = owned
            entry["generation"] = cases.PREVIOUS_GENERATION
        members[member] = entry
    return {"topics": dict(fresh.topics), "members": members}


def write_input(path: Path, strategy: str) -> None:
    doc = s2_document(strategy)
    path.write_text(json.dumps(doc), encoding="utf-8")


def run_once(strategy: str, path: Path, extra: list[str], src: str | None) -> tuple[float, int]:
    """Wall seconds of one ``regroup assign`` process (``src``: the sources it imports regroup from), and
    the size of what it printed."""
    env = dict(os.environ, PYTHONPATH=src) if src else None
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "regroup", "assign", "--strategy", strategy, "--input", str(path), *extra],
            stdout=out,
            stderr=subprocess.PIPE,
            check=False,
            env=env,
        )
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"regroup assign failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
        size = out.seek(0, os.SEEK_END)
    return wall, size


def profile(strategy: str, path: Path, extra: list[str], out: str) -> None:
    """cProfile one ``regroup assign`` in this process (output to /dev/null), top 30 by cumulative time."""
    from regroup.cli.main import main

    argv = ["assign", "--strategy", strategy, "--input", str(path), *extra]
    saved = sys.stdout
    with open(os.devnull, "w") as sink:
        sys.stdout = sink
        try:
            cProfile.runctx("main(argv)", globals(), {"main": main, "argv": argv}, out)
        finally:
            sys.stdout = saved
    pstats.Stats(out).sort_stats("cumulative").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", default="sticky")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--input", help="S2's input file (default: /tmp/regroup-s2-STRATEGY.json)")
    parser.add_argument("--rebuild", action="store_true", help="write the input file even if it exists")
    parser.add_argument("--profile", metavar="OUT", help="cProfile one run in this process, stats to OUT")
    parser.add_argument("--src", help="run regroup from these sources (a checkout's src/) instead of the installed one")
    parser.add_argument("extra", nargs="*", help="more arguments for regroup assign (after --)")
    args = parser.parse_args()
    path = Path(args.input or f"{tempfile.gettempdir()}/regroup-s2-{args.strategy}.json")
    if args.rebuild or not path.exists():
        start = time.perf_counter()
        write_input(path, args.strategy)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - start:.1f} s")
    if args.profile:
        profile(args.strategy, path, args.extra, args.profile)
        return
    walls: list[float] = []
    for i in range(args.runs):
        wall, size = run_once(args.strategy, path, args.extra, args.src)
        walls.append(wall)
        print(f"run {i + 1}: {wall:.2f} s ({size / 1e6:.1f} MB out)", flush=True)
    print(f"S2 {args.strategy}: best {min(walls):.2f} s, median {statistics.median(walls):.2f} s of {len(walls)} runs")


if __name__ == "__main__":
    main()
