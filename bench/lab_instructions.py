"""The lab's per-run cost in instructions, for callgrind: run ``runner.simulate_run`` on the bench grid's first
N runs after a warm-up run (or, with ``--warm-up-only``, the warm-up run alone, to subtract).

Compare two trees built in place (``REGROUP_COMPILE=1 python setup.py build_ext --inplace`` in a copy of each)::

    for tree in before after; do for extra in "" --warm-up-only; do
        OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0 PYTHONPATH=$tree/src \\
            valgrind --tool=callgrind --callgrind-out-file=/dev/null python bench/lab_instructions.py 5 $extra
    done; done

Per run = (instructions of the whole process - those of the warm-up alone) / N (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lab
from regroup.lab import grid, runner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=int, help="runs after the warm-up run")
    parser.add_argument("--warm-up-only", action="store_true", help="run the warm-up run alone")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("runs must be at least 1")
    seeds = math.ceil((args.runs + 1) / lab.RUNS_PER_SEED)
    specs = grid.expand(grid.parse(lab.grid_text(seeds), "bench.yaml"))[: args.runs + 1]
    runner.tune_gc()
    runner.simulate_run(specs[0])
    if not args.warm_up_only:
        for spec in specs[1:]:
            runner.simulate_run(spec)


if __name__ == "__main__":
    main()
