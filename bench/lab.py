"""Benchmarks of the rebalance lab (docs/benchmarks.md, section "Lab").

Usage::

    .venv/bin/python bench/lab.py                          # 100-run sweep on local[2] and local[1], analyze 10M events
    .venv/bin/python bench/lab.py --runs 10000 --masters 'local[2]' --skip-analyze   # the full 10,000 runs
    .venv/bin/python bench/lab.py --skip-analyze --runs 20 --repeat 3   # speedup: best of 3 alternating runs
    .venv/bin/python bench/lab.py --skip-sweep --events 1000000
    .venv/bin/python bench/lab.py --json /tmp/bench-lab.json
    .venv-compiled/bin/python bench/lab.py --skip-analyze       # the compiled build (make compiled)
    .venv/bin/python bench/lab.py --in-process --runs 20 --repeat 3   # CPU per run in this process, no Spark
    .venv/bin/python bench/lab.py --in-process --sources src,/tmp/old/src --runs 20 --repeat 3   # side by side

**Sweep.** The grid is 50 members, 5 topics x 100 partitions (500), every member subscribed to everything, 10
churn events per run (``leave x10`` or ``join x10``, 6 s apart), every runnable pair of range, roundrobin,
sticky and cooperative-sticky with eager and cooperative (5 pairs), and as many seeds as ``--runs`` needs (10
runs per seed). The network has 5 ms latency and 2 ms of jitter, so each seed is a different run (with no
jitter nothing in a run is random and every seed would repeat the same 10 runs). Each measurement is its own
subprocess (``--child``): it starts a Spark session on the given master, runs ``jobs.sweep`` (simulate +
metrics, cached) and writes both Parquet tables; the job time excludes Spark's start-up, which is reported
separately. With ``--repeat K`` the two masters alternate K times and the speedup uses the best job time of
each (the least disturbed on a shared machine). The 10,000-run figure is extrapolated linearly from the
measured run rate unless ``--runs 10000`` was measured.

**Analyze.** The harness simulates four runs of the same 50-member grid (one per churn pattern and
protocol) with the simulator, writes their event logs, and copies them until the files hold ``--events``
events in total (the copies are byte-identical but analysed independently, one task per file). The child
runs ``jobs.analyze`` and writes the tables on ``local[2]``.

**In-process.** ``--in-process`` measures what one task does per run without Spark: ``runner.simulate_run``
(simulate + metrics, under a task's collector settings, ``runner.tune_gc``) on the sweep's first ``--runs``
runs, one after the other in this process, ``--repeat`` rounds; the CPU time per run (``time.process_time``)
of each round and the best round's mean. The first round includes importing the strategies' modules. With
``--sources A,B,...`` each round measures every source tree in turn, each in its own child process with that
tree first on ``PYTHONPATH`` (e.g. this tree and an older one exported with ``git archive``, compiled in place
or not), so the trees are compared side by side under the same machine load.

**Interpreter.** The children and Spark's Python workers run this script's interpreter (``sys.executable``;
``PYSPARK_PYTHON`` is set to it), so ``.venv-compiled/bin/python bench/lab.py`` measures the compiled build
(``make compiled``) on the driver and on the executors alike. The output records which build ran:
``regroup.sim.engine``'s file in the harness and, per measurement, on an executor (``.so``: compiled).

Peak memory is the largest sum of resident set sizes over the child's whole process tree (the Python
driver, Spark's JVM and the Python workers), sampled every 0.2 s from /proc.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUNS_PER_SEED = 10


def grid_text(seeds: int) -> str:
    return f"""
name: bench
members: [50]
topics: [5]
partitions: [100]
subscriptions: [all]
churn: [{{pattern: leave, events: 10}}, {{pattern: join, events: 10}}]
strategies: [range, roundrobin, sticky, cooperative-sticky]
protocols: [eager, cooperative]
seeds: {{count: {seeds}}}
settings: {{warmup_ms: 10000, interval_ms: 6000, tail_ms: 15000, jitter_ms: 2}}
"""


# ------------------------------------------------------------------------------------------ memory sampling
def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kib(root: int) -> int:
    tree, total, todo = _children(), 0, [root]
    while todo:
        pid = todo.pop()
        total += _rss_kib(pid)
        todo.extend(tree.get(pid, []))
    return total


class PeakSampler:
    def __init__(self, pid: int) -> None:
        self.pid, self.peak_kib = pid, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            self.peak_kib = max(self.peak_kib, tree_rss_kib(self.pid))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak_kib


def run_child(args: list[str]) -> dict[str, Any]:
    """Run this script as a child, stream its stderr (progress), return its JSON and peak memory."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, __file__, "--child", *args], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    sampler = PeakSampler(proc.pid)
    out, _ = proc.communicate()
    peak = sampler.stop()
    if proc.returncode != 0:
        raise SystemExit(f"child {args} failed with {proc.returncode}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result.update(peak_rss_mib=round(peak / 1024), wall_s=round(time.monotonic() - started, 1))
    if result.get("executor_compiled", False) != build_of(engine_file())["compiled"]:
        print("bench: WARNING: the executors did not run the same build as this interpreter", file=sys.stderr)
    return result


# ------------------------------------------------------------------------------------------------ the build
def engine_file() -> str:
    """Where ``regroup.sim.engine`` was imported from: a ``.so`` file for the compiled build."""
    import regroup.sim.engine

    return str(regroup.sim.engine.__file__)


def build_of(path: str) -> dict[str, Any]:
    return {"regroup.sim.engine": path, "compiled": path.endswith(".so")}


# --------------------------------------------------------------------------------------------- the children
def child(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("sweep", "analyze"))
    parser.add_argument("--master", required=True)
    parser.add_argument("--grid")
    parser.add_argument("--events-dir")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import warnings

    warnings.filterwarnings("ignore", module="pyspark")
    from regroup.lab import grid, jobs, session

    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers run this interpreter, whatever the shell says
    t0 = time.monotonic()
    spark = session.start(args.master)
    spark.range(1).count()  # the JVM and a first job are up
    t1 = time.monotonic()
    try:
        if args.what == "sweep":
            runs = grid.expand(grid.load(args.grid))
            tables = jobs.sweep(spark, runs)
            items = len(runs)
        else:
            paths = sorted(str(p) for p in Path(args.events_dir).glob("*.jsonl"))
            tables = jobs.analyze(spark, paths)
            items = len(paths)
        jobs.write(tables, Path(args.out))
        t2 = time.monotonic()
        rebalances = tables.rebalances.count()
        executor = spark.sparkContext.parallelize([0], 1).map(lambda _: engine_file()).collect()[0]
    finally:
        session.stop(spark)
    result = {"items": items, "start_s": round(t1 - t0, 1), "job_s": round(t2 - t1, 1), "rebalances": rebalances}
    result["executor_compiled"] = build_of(executor)["compiled"]
    print(json.dumps(result))


# -------------------------------------------------------------------------------------------------- harness
def in_process(runs: int, rounds: int) -> dict[str, Any]:
    """CPU time per run of ``runner.simulate_run`` on the sweep's first ``runs`` runs, ``rounds`` times."""
    from regroup.lab import grid, runner

    specs = grid.expand(grid.parse(grid_text(math.ceil(runs / RUNS_PER_SEED)), "bench.yaml"))[:runs]
    runner.tune_gc()  # as a sweep task does
    means: list[float] = []
    for round_ in range(rounds):
        total = 0.0
        for spec in specs:
            t0 = time.process_time()
            runner.simulate_run(spec)
            total += time.process_time() - t0
        means.append(total / len(specs))
        print(f"bench: in-process round {round_ + 1}: {1000 * means[-1]:.1f} ms CPU per run", file=sys.stderr)
    return {
        "runs": len(specs),
        "cpu_ms_per_run": [round(1000 * m, 1) for m in means],
        "best_cpu_ms_per_run": round(1000 * min(means), 1),
    }


def compare_sources(sources: list[str], runs: int, rounds: int) -> dict[str, Any]:
    """``in_process`` for each source tree in turn, ``rounds`` times, each in a child process."""
    out: dict[str, Any] = {}
    for round_ in range(rounds):
        for src in sources:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
            proc = subprocess.run(
                [sys.executable, __file__, "--in-process-child", "--runs", str(runs)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            entry = out.setdefault(src, {"build": result["build"], "cpu_ms_per_run": []})
            entry["cpu_ms_per_run"].append(result["cpu_ms_per_run"][0])
            print(f"bench: round {round_ + 1}: {src}: {result['cpu_ms_per_run'][0]} ms CPU per run", file=sys.stderr)
    for entry in out.values():
        entry["best_cpu_ms_per_run"] = min(entry["cpu_ms_per_run"])
    return out


def make_event_logs(folder: Path, total_events: int) -> tuple[int, int]:
    """Simulated logs copied up to ``total_events`` events; returns (files, events)."""
    from regroup.lab import grid, scenarios
    from regroup.sim import simulate

    g = grid.parse(grid_text(1), "bench.yaml")
    originals: list[tuple[str, int]] = []
    for run in grid.expand(g):
        if run.strategy == "cooperative-sticky":  # one eager and one cooperative run per churn pattern
            sim = simulate(scenarios.scenario(run), run.seed)
            originals.append((sim.log.text(), len(sim.log.events)))
    files = events = 0
    while events < total_events:
        text, count = originals[files % len(originals)]
        (folder / f"log-{files:05d}.jsonl").write_text(text, encoding="utf-8")
        files += 1
        events += count
    return files, events


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--in-process-child":
        runs = int(sys.argv[sys.argv.index("--runs") + 1])
        result = in_process(runs, 2)  # (the first round imports the strategies' modules)
        result["cpu_ms_per_run"] = result["cpu_ms_per_run"][1:]
        print(json.dumps({**result, "build": build_of(engine_file())}))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="sweep runs per master (multiple of 10)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="alternate local[2] and local[1] this many times (best of each)"
    )
    parser.add_argument(
        "--masters", default="local[2],local[1]", help="comma-separated Spark masters for the sweep, in order"
    )
    parser.add_argument("--events", type=int, default=10_000_000, help="events to analyze")
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--skip-analyze", action="store_true")
    parser.add_argument(
        "--in-process", action="store_true", help="only CPU per run in this process, no Spark (--runs, --repeat)"
    )
    parser.add_argument(
        "--sources", help="with --in-process: comma-separated source trees to measure side by side (see above)"
    )
    parser.add_argument("--json", help="write the results as JSON to this file")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="regroup-lab-bench-"))
    build = {"python": sys.executable, **build_of(engine_file())}
    print(f"bench: {'compiled' if build['compiled'] else 'interpreted'} build: {build}", file=sys.stderr, flush=True)
    results: dict[str, Any] = {"cpus": os.cpu_count(), "load_average": os.getloadavg(), "build": build}
    try:
        if args.in_process and args.sources:
            results["in-process by source"] = compare_sources(args.sources.split(","), args.runs, args.repeat)
        elif args.in_process:
            results["in-process"] = in_process(args.runs, args.repeat)
        elif not args.skip_sweep:
            seeds = math.ceil(args.runs / RUNS_PER_SEED)
            grid_path = work / "bench.yaml"
            grid_path.write_text(grid_text(seeds), encoding="utf-8")
            masters = [m for m in args.masters.split(",") if m]
            for round_ in range(args.repeat):
                for master in masters:
                    runs = seeds * RUNS_PER_SEED
                    print(f"bench: sweep of {runs} runs on {master} ({round_ + 1}/{args.repeat})", file=sys.stderr)
                    out = str(work / "sweep")
                    r = run_child(["sweep", "--master", master, "--grid", str(grid_path), "--out", out])
                    r["runs_per_s"] = round(r["items"] / r["job_s"], 2)
                    r["extrapolated_10000_runs_s"] = round(10_000 / r["runs_per_s"])
                    results.setdefault(f"sweep {master}", []).append(r)
                    print(f"bench: {master}: {r}", file=sys.stderr, flush=True)
            best = {m: min(r["job_s"] for r in results[f"sweep {m}"]) for m in masters}
            results["best job_s"] = best
            if "local[1]" in best and "local[2]" in best:
                results["speedup local[1] -> local[2] (best of each)"] = round(best["local[1]"] / best["local[2]"], 2)
        if not args.skip_analyze and not args.in_process:
            logs = work / "logs"
            logs.mkdir()
            t0 = time.monotonic()
            files, events = make_event_logs(logs, args.events)
            size = sum(p.stat().st_size for p in logs.iterdir())
            print(
                f"bench: {events} events in {files} files ({size / 2**20:.0f} MiB), made in "
                f"{time.monotonic() - t0:.0f} s; analyzing on local[2]",
                file=sys.stderr,
                flush=True,
            )
            r = run_child(["analyze", "--master", "local[2]", "--events-dir", str(logs), "--out", str(work / "an")])
            r.update(
                events=events, files=files, mib_on_disk=round(size / 2**20), events_per_s=round(events / r["job_s"])
            )
            results["analyze local[2]"] = r
            print(f"bench: analyze: {r}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
