"""Benchmark harness for regroup's assignors (and, optionally, kafka-python's sticky assignor).

Usage::

    .venv/bin/python bench/assignors.py [--cases S1,S2,...] [--repeat 5] [--kafka-python] [--json OUT]
    .venv/bin/python bench/assignors.py --profile S5:sticky     # cProfile one assign() call

Scenarios (member ids ``consumer-%05d``, topics ``topic-%04d``):

* ``S1``       2,000 members, all subscribed to 200 topics x 5,000 partitions (1,000,000 partitions), fresh.
* ``S2``       S1's own result (same strategy) as the previous assignment (owned + generation 1);
               ``consumer-00000`` leaves.
* ``S4-fresh`` 500 members, 100 topics x 200 partitions; member i subscribes to topic j iff (i + j) % 3 != 0.
* ``S4-leave`` S4-fresh's own result as the previous assignment; ``consumer-00000`` leaves.
* ``S5``       2,000 members, 200 topics x 1,000 partitions; member i subscribes to topic j iff (7i + j) % 5 != 0.
* ``S6-full``  10,000 members, 100 topics x 1,000 partitions, homogeneous, server-side, fresh.
* ``S6-incr``  S6-full's own target as ``owned``; ``consumer-10000`` joins.

``--cases`` accepts case keys or scenario prefixes (``S4`` selects both S4 cases).

Every (case, strategy) runs in a fresh subprocess (this script with ``--single CASE:STRATEGY``), one at a
time. The child builds the spec (and, for change cases, loads the previous assignment computed beforehand
by another child with ``--prepare``), applies ``with_previous``, then times ``assign()``: one warm-up call,
then the median of ``--repeat`` calls (fewer when a call is slow, see ``TIME_BUDGET_S``). Spec construction
and ``with_previous`` are reported separately and never timed as part of ``assign()``. The warm-up result is
checked with ``metrics.validity_errors`` and summarised (min/max partitions per member, partitions moved).

Peak memory: after imports and spec construction the child resets the kernel's RSS high-water mark (best
effort, ``/proc/self/clear_refs``) and reads ``ru_maxrss`` as the baseline; after the warm-up ``assign()``
it reads ``ru_maxrss`` again. Both the total peak and the delta are reported.

For the balanced family (``sticky``, ``cooperative-sticky``, ``uniform``) the child also times the phases
of ``assign()`` separately: decoding the claims, the NumPy engine (``sticky.run_engine``) and the conversion
to plain dicts (``EngineRun.to_assignment``; for ``cooperative-sticky`` the withholding step plus the
conversion).

``--kafka-python`` also runs kafka-python's ``StickyPartitionAssignor`` on the inputs given to regroup's
``sticky`` (the previous assignment is regroup's own sticky result), with a hard cap of ``KAFKA_CAP_S``
seconds per run: the subprocess is killed and the case reported as ``> 120 s``. kafka-python decodes the
sticky user data expecting an int16 version prefix that Kafka's wire format does not have, so the harness
encodes the user data with that prefix (``StickyAssignorUserData.encode(version=1)``, which its own
decoder reads), and checks on a small case that kafka-python really is sticky with it.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import gc
import json
import logging
import os
import pickle
import platform
import pstats
import queue
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NamedTuple

from regroup.assignors import metrics, registry
from regroup.assignors.array_assignment import ArrayAssignment
from regroup.assignors.base import PartitionAssignor
from regroup.assignors.cooperative_sticky import CooperativeStickyAssignor, withhold_transfers
from regroup.assignors.spec import NO_GENERATION, Assignment, GroupSpec, MemberSubscription
from regroup.assignors.sticky import OwnedClaim, StickyAssignor, run_engine
from regroup.assignors.uniform import UniformAssignor

#: A slow call is repeated only as often as fits in this many seconds (at least once after the warm-up).
TIME_BUDGET_S = 60.0
#: Hard cap per kafka-python assign() call.
KAFKA_CAP_S = 120.0
#: Generous cap for any other child step (setup, regroup runs, validation).
CHILD_CAP_S = 1800.0
#: Strategy label of the kafka-python runs.
KAFKA_PYTHON = "kafka-python-sticky"
#: Generation the previous assignment carries in change cases.
PREVIOUS_GENERATION = 1
#: Validation message suffix for a subscribed partition nobody got (cooperative-sticky withholds some).
UNASSIGNED_SUFFIX = "is subscribed but unassigned"


# ---------------------------------------------------------------------------------------------------------------
# scenarios


@dataclass(frozen=True, slots=True)
class Topology:
    """Members, topics and who subscribes to what (``subscribes(i, j)``; ``None`` = everyone to everything)."""

    members: int
    topics: int
    partitions: int
    subscribes: Callable[[int, int], bool] | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """One member leaves or joins (a joiner subscribes to every topic)."""

    kind: str  # "leave" | "join"
    member: str


@dataclass(frozen=True, slots=True)
class Case:
    key: str
    title: str
    topology: Topology
    strategies: tuple[str, ...]
    fresh: str | None = None  # key of the case whose result (same strategy) is the previous assignment
    change: Change | None = None
    kafka_python: bool = False


def member_id(i: int) -> str:
    return f"consumer-{i:05d}"


def topic_name(j: int) -> str:
    return f"topic-{j:04d}"


_S1 = Topology(2_000, 200, 5_000)
_S4 = Topology(500, 100, 200, lambda i, j: (i + j) % 3 != 0)
_S5 = Topology(2_000, 200, 1_000, lambda i, j: (7 * i + j) % 5 != 0)
_S6 = Topology(10_000, 100, 1_000)
_BALANCED = ("sticky", "cooperative-sticky", "uniform", "range", "roundrobin")
_SERVER = ("uniform", "server-range")

CASES: tuple[Case, ...] = (
    Case("S1", "uniform fresh", _S1, _BALANCED, kafka_python=True),
    Case("S2", "uniform, one leaves", _S1, _BALANCED, "S1", Change("leave", member_id(0)), kafka_python=True),
    Case("S4-fresh", "heterogeneous fresh", _S4, _BALANCED, kafka_python=True),
    Case("S4-leave", "heterogeneous, one leaves", _S4, _BALANCED, "S4-fresh", Change("leave", member_id(0)), True),
    Case("S5", "heterogeneous large fresh", _S5, _BALANCED, kafka_python=True),
    Case("S6-full", "server-side full", _S6, _SERVER),
    Case("S6-incr", "server-side incremental, one joins", _S6, _SERVER, "S6-full", Change("join", member_id(10_000))),
)
CASE_BY_KEY = {c.key: c for c in CASES}

#: Kafka's Java assignors on the same inputs (seconds; median of 5 after JIT warm-up, 2-core machine).
JAVA_S: dict[tuple[str, str], float] = {
    ("S1", "sticky"): 0.053,
    ("S1", "cooperative-sticky"): 0.054,
    ("S1", "uniform"): 0.021,
    ("S2", "sticky"): 0.879,
    ("S2", "cooperative-sticky"): 0.565,
    ("S2", "uniform"): 0.040,
    ("S4-fresh", "sticky"): 9.8,
    ("S4-fresh", "cooperative-sticky"): 9.3,
    ("S4-fresh", "uniform"): 0.018,
    ("S5", "sticky"): 82.0,
    ("S5", "cooperative-sticky"): 76.0,
    ("S5", "uniform"): 0.266,
    ("S6-incr", "uniform"): 0.0088,
}

#: Targets for regroup's end-to-end assign() time (seconds).
TARGET_S: dict[tuple[str, str], float] = {
    ("S1", "sticky"): 0.3,
    ("S1", "cooperative-sticky"): 0.3,
    ("S2", "sticky"): 0.5,
    ("S2", "cooperative-sticky"): 0.5,
    ("S4-fresh", "sticky"): 0.3,
    ("S4-fresh", "cooperative-sticky"): 0.3,
    ("S5", "sticky"): 1.0,
    ("S5", "cooperative-sticky"): 1.0,
    ("S6-incr", "uniform"): 0.010,
}


def fresh_spec(topology: Topology) -> GroupSpec:
    """The scenario's members with no previous assignment."""
    names = tuple(topic_name(j) for j in range(topology.topics))
    shared: dict[tuple[str, ...], tuple[str, ...]] = {}
    members: dict[str, MemberSubscription] = {}
    for i in range(topology.members):
        if topology.subscribes is None:
            topics = names
        else:
            test = topology.subscribes
            topics = tuple(t for j, t in enumerate(names) if test(i, j))
        members[member_id(i)] = MemberSubscription(topics=shared.setdefault(topics, topics))
    return GroupSpec(topics=dict.fromkeys(names, topology.partitions), members=members)


def changed_spec(fresh: GroupSpec, change: Change, previous: Assignment) -> GroupSpec:
    """``fresh`` after ``change``, every remaining member owning its previous partitions (generation 1). A
    previous result in arrays (``ArrayAssignment``) goes back in as it is, each member's ``owned`` a view of it,
    as a caller holding the previous result passes it."""
    members = dict(fresh.members)
    if change.kind == "leave":
        del members[change.member]
    else:
        members[change.member] = MemberSubscription(topics=tuple(sorted(fresh.topics)))
    out: dict[str, MemberSubscription] = {}
    for m, sub in members.items():
        if isinstance(previous, ArrayAssignment):
            if m in previous:
                sub = dataclasses.replace(sub, owned=previous.owned(m), generation=PREVIOUS_GENERATION)
            out[m] = sub
            continue
        owned = previous.get(m)
        if owned:
            sub = dataclasses.replace(
                sub, owned={t: tuple(ps) for t, ps in owned.items() if ps}, generation=PREVIOUS_GENERATION
            )
        out[m] = sub
    return GroupSpec(topics=fresh.topics, members=out)


def case_inputs(case: Case, previous_path: str | None) -> tuple[GroupSpec, Assignment | None]:
    """The neutral spec of ``case`` (owned/generation, before ``with_previous``) and the previous assignment."""
    spec = fresh_spec(case.topology)
    if case.change is None:
        return spec, None
    if previous_path is None:
        raise SystemExit(f"{case.key} needs --prev (the result of {case.fresh})")
    with open(previous_path, "rb") as f:
        previous: Assignment = pickle.load(f)
    return changed_spec(spec, case.change, previous), previous


def select_cases(arg: str | None) -> list[Case]:
    if not arg:
        return list(CASES)
    wanted = [w.strip() for w in arg.split(",") if w.strip()]
    chosen = [c for c in CASES if any(c.key == w or c.key.split("-")[0] == w for w in wanted)]
    unknown = [w for w in wanted if not any(c.key == w or c.key.split("-")[0] == w for c in CASES)]
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(unknown)}; known: {', '.join(CASE_BY_KEY)}")
    return chosen


# ---------------------------------------------------------------------------------------------------------------
# measurement helpers (child side)


def maxrss_kib() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux


def reset_peak_rss() -> bool:
    """Reset the kernel's RSS high-water mark so ``ru_maxrss`` restarts from the current RSS (Linux ≥ 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def timed(fn: Callable[[], object], repeat: int, first: float) -> list[float]:
    """Run ``fn`` up to ``repeat`` times (fewer if ``first`` says one call is slow); wall-clock seconds each."""
    n = max(1, min(repeat, int(TIME_BUDGET_S // max(first, 1e-9))))
    times: list[float] = []
    for _ in range(n):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
        del result  # freed outside the timed window
    return times


def quality(spec: GroupSpec, result: Assignment, previous: Assignment | None, *, withholds: bool) -> dict[str, Any]:
    """Validity, min/max partitions per member, partitions moved (``withholds``: unassigned is not an error)."""
    errors = metrics.validity_errors(spec, result)
    unassigned = [e for e in errors if e.endswith(UNASSIGNED_SUFFIX)]
    hard = [e for e in errors if not e.endswith(UNASSIGNED_SUFFIX)] if withholds else errors
    per_member = metrics.loads(result)
    loads = [per_member.get(m, 0) for m in spec.members]
    out: dict[str, Any] = {
        "valid": not hard,
        "error_count": len(hard),
        "errors": hard[:5],
        "withheld": len(unassigned) if withholds else None,
        "assigned": sum(loads),
        "min_partitions": min(loads) if loads else 0,
        "max_partitions": max(loads) if loads else 0,
    }
    if previous is not None:
        out["moved"] = metrics.partitions_moved(previous, result)
    return out


def emit(tag: str, payload: object = None) -> None:
    """One protocol line to the parent."""
    line = tag if payload is None else f"{tag} {json.dumps(payload)}"
    print(line, flush=True)


def claims_function(assignor: PartitionAssignor, spec: GroupSpec) -> Callable[[], dict[str, OwnedClaim]] | None:
    """How ``assignor.assign`` turns the spec into engine claims (``None`` outside the balanced family)."""
    if isinstance(assignor, StickyAssignor | CooperativeStickyAssignor):
        claim = assignor.member_claim
        return lambda: {m: claim(sub) for m, sub in spec.members.items()}
    if isinstance(assignor, UniformAssignor):
        return lambda: {m: (sub.owned, NO_GENERATION) for m, sub in spec.members.items()}
    return None


def phase_times(assignor: PartitionAssignor, spec: GroupSpec, repeat: int) -> dict[str, Any] | None:
    """Medians of the claims, engine and conversion phases of ``assign()`` (balanced family only)."""
    make_claims = claims_function(assignor, spec)
    if make_claims is None:
        if not hasattr(assignor.assign(spec), "to_dict"):
            return None
        # a lazy result (range, roundrobin, server-range): what reading every member costs, on fresh results
        reads: list[float] = []
        for _ in range(repeat):
            result = assignor.assign(spec)
            start = time.perf_counter()
            result.to_dict()  # type: ignore[attr-defined]
            reads.append(time.perf_counter() - start)
        return {"conversion_s": statistics.median(reads), "conversion_label": "to_dict", "phase_repeats": repeat}
    out: dict[str, Any] = {}
    start = time.perf_counter()
    claims = make_claims()
    out["claims_s"] = statistics.median(timed(make_claims, repeat, time.perf_counter() - start))
    start = time.perf_counter()
    run = run_engine(spec, claims)
    engine_times = timed(lambda: run_engine(spec, claims), repeat, time.perf_counter() - start)
    out["engine_s"] = statistics.median(engine_times)
    out["phase_repeats"] = len(engine_times)

    # (assign() returns the arrays; this is what reading every member's view costs, when someone does)
    def convert_all() -> Assignment:
        return run.layout.to_assignment(run.per_member)

    convert: Callable[[], Assignment] = convert_all
    out["conversion_label"] = "to_assignment"
    if isinstance(assignor, CooperativeStickyAssignor):

        def withhold_and_convert() -> Assignment:
            return run.layout.to_assignment(withhold_transfers(run))

        convert = withhold_and_convert
        out["conversion_label"] = "withhold+to_assignment"
    start = time.perf_counter()
    convert()
    out["conversion_s"] = statistics.median(timed(convert, repeat, time.perf_counter() - start))
    return out


# ---------------------------------------------------------------------------------------------------------------
# child: regroup


def child_regroup(case: Case, strategy: str, repeat: int, previous_path: str | None) -> dict[str, Any]:
    start = time.perf_counter()
    assignor = registry.get(strategy)
    neutral, previous = case_inputs(case, previous_path)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    spec = assignor.with_previous(neutral)
    with_previous_s = time.perf_counter() - start
    del neutral

    gc.collect()
    hwm_reset = reset_peak_rss()
    base_kib = maxrss_kib()
    emit("START")
    start = time.perf_counter()
    result = assignor.assign(spec)
    warmup_s = time.perf_counter() - start
    emit("RUN", warmup_s)
    peak_kib = maxrss_kib()
    checked = quality(spec, result, previous, withholds=isinstance(assignor, CooperativeStickyAssignor))
    del result

    times = timed(lambda: assignor.assign(spec), repeat, warmup_s)
    phases = phase_times(assignor, spec, repeat)
    return {
        "case": case.key,
        "strategy": strategy,
        "status": "ok",
        "assign_s": statistics.median(times),
        "times_s": times,
        "warmup_s": warmup_s,
        "repeats": len(times),
        "phases": phases,
        "build_s": build_s,
        "with_previous_s": with_previous_s,
        "peak_rss_mib": peak_kib / 1024,
        "baseline_rss_mib": base_kib / 1024,
        "delta_rss_mib": (peak_kib - base_kib) / 1024,
        "hwm_reset": hwm_reset,
        **checked,
    }


def child_prepare(case: Case, strategy: str, previous_path: str | None, out: str) -> None:
    """Compute ``case`` with ``strategy`` and pickle the result (the previous assignment of a change case)."""
    neutral, _ = case_inputs(case, previous_path)
    assignor = registry.get(strategy)
    result = assignor.assign(assignor.with_previous(neutral))
    with open(out, "wb") as f:
        pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)


# ---------------------------------------------------------------------------------------------------------------
# child: kafka-python


class _KafkaMember(NamedTuple):
    """What kafka-python's assign() reads from a JoinGroupResponseMember."""

    member_id: str
    metadata: Any


class _KafkaCluster:
    """Minimal stand-in for kafka-python's ClusterMetadata: just the partition counts."""

    def __init__(self, topics: Mapping[str, int]) -> None:
        self._partitions = {t: set(range(n)) for t, n in topics.items()}

    def topics(self) -> set[str]:
        return set(self._partitions)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self._partitions.get(topic)


def kafka_members(spec: GroupSpec, *, prefixed: bool = True) -> list[_KafkaMember]:
    """Member metadata as kafka-python's sticky assignor expects it.

    ``prefixed``: encode the sticky user data with the int16 version prefix kafka-python's decoder reads
    (Kafka's own format, without it, makes kafka-python silently drop the previous assignment).
    """
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    members = []
    for m in sorted(spec.members):
        sub = spec.members[m]
        user_data = b""
        if sub.owned:
            data = StickyAssignorUserData([(t, list(ps)) for t, ps in sub.owned.items()], sub.generation)
            user_data = data.encode(version=1, header=prefixed)
        members.append(
            _KafkaMember(m, ConsumerProtocolSubscription(version=0, topics=list(sub.topics), user_data=user_data))
        )
    return members


def silence_kafka_logging() -> None:
    """kafka-python logs a traceback for user data it cannot decode; the harness reports the effect instead."""
    logging.getLogger("kafka").addHandler(logging.NullHandler())
    logging.getLogger("kafka").propagate = False


def kafka_assign(spec: GroupSpec, members: Sequence[_KafkaMember], cluster: _KafkaCluster) -> Any:
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    return StickyPartitionAssignor().assign(cluster, list(members))


def kafka_result(raw: Mapping[str, Any]) -> Assignment:
    return {m: {t: list(ps) for t, ps in a.assigned_partitions if ps} for m, a in raw.items()}


def child_kafka(case: Case, repeat: int, previous_path: str | None) -> dict[str, Any]:
    """Time kafka-python's sticky assignor; the first call counts as the warm-up when there are more."""
    start = time.perf_counter()
    spec, previous = case_inputs(case, previous_path)
    cluster = _KafkaCluster(spec.topics)
    members = kafka_members(spec)
    build_s = time.perf_counter() - start
    silence_kafka_logging()

    gc.collect()
    hwm_reset = reset_peak_rss()
    base_kib = maxrss_kib()
    peak_kib = base_kib
    checked: dict[str, Any] = {}
    runs: list[float] = []
    while True:
        gc.collect()
        emit("START")
        start = time.perf_counter()
        raw = kafka_assign(spec, members, cluster)
        runs.append(time.perf_counter() - start)
        emit("RUN", runs[-1])
        if len(runs) == 1:
            peak_kib = maxrss_kib()
            checked = quality(spec, kafka_result(raw), previous, withholds=False)
        del raw
        if len(runs) > repeat or sum(runs) + runs[-1] > TIME_BUDGET_S:
            break
    times = runs[1:] if len(runs) > 1 else runs
    return {
        "case": case.key,
        "strategy": KAFKA_PYTHON,
        "status": "ok",
        "assign_s": statistics.median(times),
        "times_s": times,
        "warmup_s": runs[0] if len(runs) > 1 else None,
        "repeats": len(times),
        "phases": None,
        "build_s": build_s,
        "with_previous_s": None,
        "peak_rss_mib": peak_kib / 1024,
        "baseline_rss_mib": base_kib / 1024,
        "delta_rss_mib": (peak_kib - base_kib) / 1024,
        "hwm_reset": hwm_reset,
        **checked,
    }


def kafka_stickiness_check() -> dict[str, Any]:
    """Small case: 3 members x 3 topics x 4 partitions, one leaves. Does kafka-python keep the survivors'
    partitions with prefixed user data, and with Kafka's unprefixed format?"""
    silence_kafka_logging()
    topology = Topology(3, 3, 4)
    fresh = fresh_spec(topology)
    cluster = _KafkaCluster(fresh.topics)
    first = kafka_result(kafka_assign(fresh, kafka_members(fresh), cluster))
    after = changed_spec(fresh, Change("leave", member_id(0)), first)
    survivors = {m: first[m] for m in after.members}
    out: dict[str, Any] = {}
    for label, prefixed in (("prefixed", True), ("kafka_format", False)):
        result = kafka_result(kafka_assign(after, kafka_members(after, prefixed=prefixed), cluster))
        kept = metrics.fraction_kept(survivors, result)
        out[label] = {"fraction_kept": kept, "sticky": kept == 1.0, "valid": metrics.is_valid(after, result)}
    return out


# ---------------------------------------------------------------------------------------------------------------
# parent: running children


@dataclass(slots=True)
class ChildOutcome:
    payload: dict[str, Any] | None
    runs: list[float]
    killed: bool
    stderr: str
    returncode: int | None


def _pump(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def run_child(argv: Sequence[str], run_cap: float) -> ChildOutcome:
    """Run this script as a child; kill it if one timed call (between its START and RUN lines) takes longer
    than ``run_cap`` seconds, or anything else takes longer than ``CHILD_CAP_S``."""
    cmd = [sys.executable, str(Path(__file__).resolve()), *argv]
    payload: dict[str, Any] | None = None
    runs: list[float] = []
    killed = False
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
        reader.start()
        deadline = time.monotonic() + CHILD_CAP_S
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                proc.kill()  # our own child, by handle
                killed = True
                break
            if line is None:
                break
            tag, _, rest = line.strip().partition(" ")
            if tag == "START":  # one timed call begins: it gets run_cap seconds
                deadline = time.monotonic() + run_cap
            elif tag == "RUN":
                runs.append(float(rest))
                deadline = time.monotonic() + CHILD_CAP_S
            elif tag == "RESULT":
                payload = json.loads(rest)
        proc.wait()
        reader.join(timeout=5)
        err.seek(0)
        stderr = err.read()
    return ChildOutcome(payload, runs, killed, stderr[-4000:], proc.returncode)


class Previous:
    """Previous assignments computed on demand by ``--prepare`` children, cached for the whole run."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.paths: dict[tuple[str, str], str] = {}

    def path(self, case_key: str, strategy: str) -> str:
        """Pickle of ``case_key``'s result with ``strategy`` (computing its own previous first if needed)."""
        key = (case_key, strategy)
        if key not in self.paths:
            case = CASE_BY_KEY[case_key]
            argv = ["--prepare", f"{case_key}:{strategy}"]
            if case.fresh is not None:
                argv += ["--prev", self.path(case.fresh, strategy)]
            out = os.path.join(self.directory, f"{case_key}.{strategy}.pickle")
            argv += ["--out", out]
            outcome = run_child(argv, CHILD_CAP_S)
            if outcome.returncode != 0 or not os.path.exists(out):
                raise RuntimeError(f"preparing {case_key}:{strategy} failed:\n{outcome.stderr}")
            self.paths[key] = out
        return self.paths[key]


def failed(case: Case, strategy: str, status: str, outcome: ChildOutcome | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"case": case.key, "strategy": strategy, "status": status, "assign_s": None}
    if outcome is not None:
        row["runs_before_kill_s"] = outcome.runs
        row["stderr_tail"] = outcome.stderr[-1500:]
    return row


class JavaBench:
    """Kafka's own assignors on the same cases (``../shared/java/assignor-bench``'s ``AssignorBench``), compiled
    once and run case by case beside regroup's: one JVM per case, JIT warm-up, the median of ``repeat`` calls."""

    def __init__(self, directory: Path, repeat: int) -> None:
        self.repeat = repeat
        self.java_dir = Path(__file__).resolve().parents[1].parent / "shared" / "java"
        self.classes = directory / "java-classes"
        self.classpath = ""
        self.why_not: str | None = None
        sources = sorted((self.java_dir / "assignor-bench").glob("*.java"))
        if not sources or shutil.which("javac") is None or shutil.which("java") is None:
            self.why_not = f"Java side skipped: no javac/java or no {self.java_dir / 'assignor-bench'}"
            return
        jars = [self.java_dir / "kafka-clients.jar", self.java_dir / "kafka-server-assignors.jar"]
        jars += sorted((self.java_dir / "lib").glob("*.jar"))
        self.classpath = ":".join(str(j) for j in jars)
        self.classes.mkdir(parents=True, exist_ok=True)
        built = subprocess.run(
            ["javac", "-nowarn", "-cp", self.classpath, "-d", str(self.classes), *map(str, sources)],
            capture_output=True,
            text=True,
        )
        if built.returncode != 0:
            self.why_not = f"Java side skipped: javac failed: {built.stderr.strip().splitlines()[-1:]}"

    def run(self, case: Case, strategies: Sequence[str]) -> dict[str, float]:
        """Median seconds per strategy for ``case`` (strategies Kafka lacks, or that failed, are absent)."""
        if self.why_not is not None:
            return {}
        command = [
            "java",
            "-Xmx8g",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{self.classes}:{self.classpath}",
            "AssignorBench",
            "--case",
            case.key,
            "--strategies",
            ",".join(strategies),
            "--warmup",
            "2",
            "--repeat",
            str(self.repeat),
            "--budget-s",
            str(JAVA_BUDGET_S),
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=JAVA_BUDGET_S * 4 * len(strategies))
        except subprocess.TimeoutExpired:
            return {}
        out: dict[str, float] = {}
        for line in done.stdout.splitlines():
            if line.startswith("RESULT "):
                row = json.loads(line.removeprefix("RESULT "))
                if "median_ms" in row and "error" not in row:
                    out[row["strategy"]] = row["median_ms"] / 1000
        return out


#: Kafka's sticky assignors take minutes on the heterogeneous cases: each Java strategy gets this many seconds
JAVA_BUDGET_S = 120


def measure(case: Case, strategy: str, repeat: int, previous: Previous) -> dict[str, Any]:
    source = "sticky" if strategy == KAFKA_PYTHON else strategy
    argv = ["--single", f"{case.key}:{strategy}", "--repeat", str(repeat)]
    if case.fresh is not None:
        argv += ["--prev", previous.path(case.fresh, source)]
    cap = KAFKA_CAP_S if strategy == KAFKA_PYTHON else CHILD_CAP_S
    outcome = run_child(argv, cap)
    if outcome.payload is not None:
        return outcome.payload
    if outcome.killed:
        return failed(case, strategy, f"> {cap:.0f} s", outcome)
    return failed(case, strategy, f"error (exit {outcome.returncode})", outcome)


# ---------------------------------------------------------------------------------------------------------------
# report


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 0.1:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.2f} s"


def fmt_ratio(num: float | None, den: float | None) -> str:
    if num is None or den is None or den <= 0:
        return "-"
    ratio = num / den
    return f"{ratio:.0f}x" if ratio >= 10 else f"{ratio:.2f}x"


def row_time(row: Mapping[str, Any]) -> str:
    if row.get("assign_s") is None:
        return str(row.get("status", "-"))
    return fmt_s(row["assign_s"])


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows]
    return "\n".join([line, rule, *body])


def target_status(row: Mapping[str, Any]) -> tuple[str, bool | None]:
    target = TARGET_S.get((row["case"], row["strategy"]))
    if target is None:
        return "-", None
    assign_s = row.get("assign_s")
    met = assign_s is not None and assign_s <= target and bool(row.get("valid"))
    return f"≤ {fmt_s(target)}: {'met' if met else 'MISSED'}", met


def timing_table(results: Sequence[Mapping[str, Any]]) -> str:
    regroup_rows = [r for r in results if r["strategy"] != KAFKA_PYTHON]
    kafka = {r["case"]: r for r in results if r["strategy"] == KAFKA_PYTHON}
    rows = []
    for r in regroup_rows:
        phases = r.get("phases") or {}
        java = r.get("java_s", JAVA_S.get((r["case"], r["strategy"])))
        kp = kafka.get(r["case"]) if r["strategy"] == "sticky" else None
        if kp is None:
            kp_cell, kp_ratio = "-", "-"
        elif kp.get("assign_s") is None:
            kp_cell = str(kp.get("status"))
            kp_ratio = f"> {KAFKA_CAP_S / r['assign_s']:.0f}x" if r.get("assign_s") else "-"
        else:
            kp_cell, kp_ratio = fmt_s(kp["assign_s"]), fmt_ratio(kp["assign_s"], r.get("assign_s"))
        rows.append(
            [
                r["case"],
                r["strategy"],
                row_time(r),
                fmt_s(min(r["times_s"])) if r.get("times_s") else "-",
                str(r.get("repeats", "-")),
                fmt_s(phases.get("claims_s")),
                fmt_s(phases.get("engine_s")),
                fmt_s(phases.get("conversion_s")),
                fmt_s(java),
                fmt_ratio(java, r.get("assign_s")),
                kp_cell,
                kp_ratio,
                target_status(r)[0],
            ]
        )
    headers = [
        "case",
        "strategy",
        "assign (median)",
        "best",
        "n",
        "claims",
        "engine",
        "to dicts",
        "Java",
        "Java/regroup",
        "kafka-python",
        "kp/regroup",
        "target",
    ]
    return table(headers, rows)


def quality_table(results: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for r in results:
        if r.get("assign_s") is None:
            rows.append([r["case"], r["strategy"], str(r.get("status")), *["-"] * 7])
            continue
        valid = "yes" if r.get("valid") else f"NO ({r.get('error_count')} errors)"
        if r.get("withheld"):
            valid += f", {r['withheld']} withheld"
        rows.append(
            [
                r["case"],
                r["strategy"],
                valid,
                f"{r['min_partitions']}/{r['max_partitions']}",
                str(r.get("moved", "-")),
                fmt_s(r.get("build_s")),
                fmt_s(r.get("with_previous_s")),
                f"{r['peak_rss_mib']:.0f} MiB",
                f"{r['delta_rss_mib']:.0f} MiB",
                fmt_s(r.get("warmup_s")),
            ]
        )
    headers = [
        "case",
        "strategy",
        "valid",
        "min/max",
        "moved",
        "build",
        "with_previous",
        "peak RSS",
        "Δ RSS",
        "warm-up",
    ]
    return table(headers, rows)


def machine_facts() -> dict[str, Any]:
    def pkg(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    cpu = None
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    return {
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": pkg("numpy"),
        "ortools": pkg("ortools"),
        "kafka-python": pkg("kafka-python"),
        "loadavg_at_start": os.getloadavg(),
    }


# ---------------------------------------------------------------------------------------------------------------
# entry points


def parse_pair(text: str) -> tuple[Case, str]:
    key, _, strategy = text.partition(":")
    if key not in CASE_BY_KEY or not strategy:
        raise SystemExit(f"expected CASE:STRATEGY with CASE in {', '.join(CASE_BY_KEY)}, got {text!r}")
    return CASE_BY_KEY[key], strategy


def strategy_available(name: str) -> str | None:
    """``None`` when ``registry.get(name)`` works, else why not."""
    try:
        registry.get(name)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def profile(case: Case, strategy: str, previous_path: str | None, top: int) -> None:
    assignor = registry.get(strategy)
    neutral, _ = case_inputs(case, previous_path)
    spec = assignor.with_previous(neutral)
    assignor.assign(spec)  # warm-up
    profiler = cProfile.Profile()
    profiler.enable()
    assignor.assign(spec)
    profiler.disable()
    for key in ("cumulative", "tottime"):
        print(f"--- {case.key}:{strategy}, sorted by {key} ---")
        pstats.Stats(profiler, stream=sys.stdout).strip_dirs().sort_stats(key).print_stats(top)


@contextlib.contextmanager
def scratch_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="regroup-bench-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    known = ", ".join(CASE_BY_KEY)
    parser.add_argument("--cases", help=f"comma-separated case keys or prefixes (default: all of {known})")
    parser.add_argument("--repeat", type=int, default=5, help="timed repeats after one warm-up (default 5)")
    parser.add_argument("--kafka-python", action="store_true", help="also run kafka-python's sticky assignor")
    parser.add_argument("--json", metavar="OUT", help="write machine-readable results to OUT")
    parser.add_argument("--profile", metavar="CASE:STRATEGY", help="cProfile one assign() call and exit")
    parser.add_argument("--top", type=int, default=25, help="rows of profile output (with --profile)")
    parser.add_argument(
        "--java",
        action="store_true",
        help="also time Kafka's Java assignors on each case right after regroup's (needs ../shared/java and a JDK)",
    )
    parser.add_argument("--single", metavar="CASE:STRATEGY", help=argparse.SUPPRESS)
    parser.add_argument("--prepare", metavar="CASE:STRATEGY", help=argparse.SUPPRESS)
    parser.add_argument("--prev", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.single:
        case, strategy = parse_pair(args.single)
        if strategy == KAFKA_PYTHON:
            payload = child_kafka(case, args.repeat, args.prev)
        else:
            payload = child_regroup(case, strategy, args.repeat, args.prev)
        emit("RESULT", payload)
        return 0
    if args.prepare:
        case, strategy = parse_pair(args.prepare)
        child_prepare(case, strategy, args.prev, args.out)
        return 0

    with scratch_dir() as directory:
        previous = Previous(directory)
        if args.profile:
            case, strategy = parse_pair(args.profile)
            prev = previous.path(case.fresh, strategy) if case.fresh else None
            profile(case, strategy, prev, args.top)
            return 0

        cases = select_cases(args.cases)
        facts = machine_facts()
        print("machine: " + ", ".join(f"{k}={v}" for k, v in facts.items()), flush=True)
        notes: list[str] = []
        missing = {s: why for s in {s for c in cases for s in c.strategies} if (why := strategy_available(s))}
        for name, why in sorted(missing.items()):
            notes.append(f"strategy {name!r} skipped: registry.get failed ({why})")
        results: list[dict[str, Any]] = []
        java = JavaBench(Path(directory), args.repeat) if args.java else None
        if java is not None and java.why_not is not None:
            notes.append(java.why_not)
        for case in cases:
            rows = []
            for strategy in case.strategies:
                if strategy in missing:
                    continue
                row = measure(case, strategy, args.repeat, previous)
                rows.append(row)
                print(f"  {case.key:9} {strategy:20} {row_time(row)}", file=sys.stderr, flush=True)
            if java is not None:  # the same case in Kafka's assignors, right after regroup's
                measured = java.run(case, [r["strategy"] for r in rows])
                for row in rows:
                    row["java_s"] = measured.get(row["strategy"])
                    print(f"  {case.key:9} {row['strategy']:20} Java {fmt_s(row['java_s'])}", file=sys.stderr)
            results.extend(rows)

        kafka_check: dict[str, Any] | None = None
        if args.kafka_python:
            kafka_check = kafka_stickiness_check()
            notes.append(f"kafka-python stickiness check (3 members, one leaves): {json.dumps(kafka_check)}")
            for case in cases:
                if case.kafka_python:
                    row = measure(case, KAFKA_PYTHON, args.repeat, previous)
                    results.append(row)
                    print(f"  {case.key:9} {KAFKA_PYTHON:20} {row_time(row)}", file=sys.stderr, flush=True)

    print()
    print(timing_table(results))
    print()
    print(quality_table(results))
    for r in results:
        if r.get("repeats") is not None and r["repeats"] < args.repeat:
            notes.append(f"{r['case']}:{r['strategy']}: only {r['repeats']} timed run(s) (slow call)")
        if r.get("valid") is False:
            notes.append(f"{r['case']}:{r['strategy']}: INVALID result: {r.get('errors')}")
        if r.get("hwm_reset") is False:
            notes.append(f"{r['case']}:{r['strategy']}: could not reset the RSS high-water mark; Δ may be low")
    if notes:
        print()
        for note in notes:
            print(f"note: {note}")
    if args.json:
        document = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "machine": facts,
            "repeat": args.repeat,
            "java_s": {f"{c}:{s}": v for (c, s), v in JAVA_S.items()},
            "target_s": {f"{c}:{s}": v for (c, s), v in TARGET_S.items()},
            "kafka_python_check": kafka_check,
            "results": results,
            "notes": notes,
        }
        with open(args.json, "w") as f:
            json.dump(document, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
