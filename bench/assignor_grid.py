"""Kafka's server-side assignor benchmark grid, run on Kafka's Java assignors and on regroup's, side by side.

Owns: the grid of Kafka's ``ConsumerAssignorBenchmark`` (the JMH benchmark of the KIP-848 server-side
assignors, successor of ``ServerSideAssignorBenchmark``) rebuilt as regroup ``GroupSpec`` objects, the timing
of regroup's ``uniform`` and ``server-range`` on it, and the driver of ``bench/java/AssignorGrid.java``, which
builds the same cases for Kafka's ``UniformAssignor`` and ``RangeAssignor`` and times them in one JVM.

Usage::

    .venv/bin/python bench/assignor_grid.py                        # default grid, Java beside Python
    .venv/bin/python bench/assignor_grid.py --quick                # a small subset (smoke run)
    .venv/bin/python bench/assignor_grid.py --members 10000 --runs scaling --events FULL,JOIN_ONE
    .venv/bin/python bench/assignor_grid.py --json OUT.json --markdown OUT.md
    .venv/bin/python bench/assignor_grid.py --report OUT.json                 # the table of a saved run again
    .venv/bin/python bench/assignor_grid.py --profile m5000-t500-p10000-EQUAL-HOMOGENEOUS-NONE-UNIFORM-JOIN_ONE

A case is eight parameters, as in Kafka's benchmark:

* ``members``: the members when the assignment is computed; ``topics``: the subscribed topics, named
  ``topic-<i>``; ``partitions``: the partitions over all topics.
* ``distribution``: ``EQUAL`` gives every topic ``partitions // topics`` partitions (at least one), the
  remainder one at a time from the first topic. ``SKEWED`` cuts the topics into tiers: the first tier is two
  thirds of the topics (rounded half up), each next tier a third of the one before (at least one topic), until
  every topic has a tier. The first tier's topics, placed last, have a single partition each; the other tiers
  share the remaining partitions in proportion to their size times 2^(tier - 1) (so a topic of a tier has
  twice the partitions of one of the tier before), the largest topics first; the running total is rounded
  down so the shares add up, and within a tier the first topics take the remainder. With too few partitions
  for the doubling, those topics split them equally.
* ``subscription``: member ``i`` is in bucket ``i mod B``, ``B = min(5, members, topics)``, and the topics
  are cut into ``B`` consecutive ranges, range ``b`` being topics ``[topics*b // B, topics*(b+1) // B)``.
  ``HOMOGENEOUS``: everyone subscribes to every topic. ``HETEROGENEOUS_DISJOINT``: bucket ``b`` subscribes to
  range ``b`` only. ``HETEROGENEOUS_NESTED``: bucket ``b`` subscribes to ranges ``0..b``.
* ``rack``: the cluster has three racks, one broker each, and partition ``p`` of every topic has replicas on
  brokers ``p mod 3`` and ``(p+1) mod 3``, so on racks ``rack<p mod 3>`` and ``rack<(p+1) mod 3>``, whatever the
  case. ``NONE``: members have no rack. ``PROVIDED``: member ``i`` is on ``rack<i mod 3>``.
* ``assignor``: ``RANGE`` (Kafka's ``RangeAssignor``; regroup's ``server-range``) or ``UNIFORM`` (Kafka's
  ``UniformAssignor``; regroup's ``uniform``).
* ``event``: what happened before the timed call. ``FULL``: nobody holds anything. Every other event first
  builds the group as it was before and runs the same assignor on it (untimed); its output is what each
  member still in the group holds going in (regroup: ``owned``, as the coordinator's target computation
  passes each member's current target; Java: the member's assignment and the inverted target, copied into
  fresh hash maps and sets as the coordinator rebuilds them from its records). ``STABLE``: the same group.
  ``JOIN_ONE`` / ``JOIN_MANY``: the group before had 1 / ``ceil(members / 10)`` fewer members; the joiners,
  the highest indices, hold nothing. ``LEAVE_ONE`` / ``LEAVE_MANY``: the group before had 1 /
  ``ceil(members / 10)`` more members; the leavers' partitions are unassigned. ``PARTITIONS_ADDED``:
  ``k = ceil(topics / 10)`` topics, topic ``i * topics // k`` for ``i < k``, gained one partition.
  The bucket count is the current group's in both builds.

Kafka's grid (the product of members 5/50/500/5000, topics 5/50/500/5000, partitions 5,000/10,000/20,000 and
every value of the other five parameters) is 8,064 cases, which Kafka's own benchmark calls a menu rather
than a run and covers with three runs. So does this script (``--runs``), at one partition count (10,000) so
that the default run (204 cases) takes about a quarter of an hour on two cores:

* ``scaling``: members x topics over 5/50/500/5000 each, ``EQUAL``, ``HOMOGENEOUS``, ``NONE``, both
  assignors, ``FULL``, ``STABLE``, ``JOIN_ONE`` (Kafka's first run, without the partition and rack axes);
* ``events-large``: 5,000 members, 500 topics, ``EQUAL`` and ``SKEWED``, ``HOMOGENEOUS`` and
  ``HETEROGENEOUS_NESTED``, ``NONE``, both assignors, every event (Kafka's second run without racks);
* ``racks-large``: the same group, ``EQUAL``, ``HOMOGENEOUS``, ``PROVIDED``, both assignors, ``FULL``,
  ``STABLE``, ``JOIN_ONE``, ``LEAVE_ONE`` (a sample of the second run's rack half, to keep the default run
  short; the whole half is opt-in: ``--runs events-large --racks PROVIDED``);
* ``events-many-topics``: 50 members, 5,000 topics, ``EQUAL`` and ``SKEWED``, ``HOMOGENEOUS``, ``NONE`` and
  ``PROVIDED``, both assignors, every event (Kafka's third run);
* ``disjoint`` (not in the default): 500 members, 50 topics, ``EQUAL`` and ``SKEWED``,
  ``HETEROGENEOUS_DISJOINT``, both rack settings, both assignors, every event.

``--members``, ``--topics``, ``--partitions``, ``--distributions``, ``--subscriptions``, ``--racks``,
``--assignors`` and ``--events`` replace that parameter's values in every selected run (so ``--members 10000``
gives the 10,000-member groups of Kafka's earlier grids, opt-in: a 10,000-member group with 5,000 topics holds
50 million subscription entries on each side). ``--quick`` is one small run for a smoke test.

Timing, both sides: the case is built, then ``--warmup`` untimed calls (the first one checked; Java: also until
``--java-warmup-ms`` of calls), then the median of ``--repeat`` timed calls, each after a garbage collection
(fewer calls when one is slow: ``--budget-s`` per case and side). A timed call is ``assign`` and then every
member's assignment read once, as the coordinator reads them next: for a result made of plain maps that costs
a lookup per member, for one that builds a member's view when it is read it includes building the views.

The cases are run in groups (one group = one combination of everything but assignor and event); for each group
the Java program runs it first, in one JVM kept across groups, then Python: Java and Python alternate group by
group on the noisy shared machine. Both sides report a fingerprint of the inputs (partitions, subscribed
partitions, partitions held going in; what the leavers held depends on each side's previous output), which must
agree, and the partitions each assignment revokes from a member that held them (``revoked``).

Java needs ``javac`` and Kafka's jars in ``../shared/java`` (relative to the repository; ``--java-dir``); when
either is missing, the Java side is skipped with a one-line message and the table shows regroup alone.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import itertools
import json
import math
import os
import platform
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any

import regroup
from regroup.assignors.base import PartitionAssignor
from regroup.assignors.server_range import ServerRangeAssignor
from regroup.assignors.spec import GroupSpec, MemberSubscription
from regroup.assignors.uniform import UniformAssignor

REPOSITORY = Path(__file__).resolve().parent.parent
JAVA_SOURCE = REPOSITORY / "bench" / "java" / "AssignorGrid.java"
DEFAULT_JAVA_DIR = REPOSITORY.parent / "shared" / "java"

DISTRIBUTIONS = ("EQUAL", "SKEWED")
SUBSCRIPTIONS = ("HOMOGENEOUS", "HETEROGENEOUS_DISJOINT", "HETEROGENEOUS_NESTED")
RACKS = ("NONE", "PROVIDED")
ASSIGNORS = ("RANGE", "UNIFORM")
EVENTS = ("FULL", "STABLE", "JOIN_ONE", "JOIN_MANY", "LEAVE_ONE", "LEAVE_MANY", "PARTITIONS_ADDED")

#: the brokers' racks, and the members' when they have one
RACK_COUNT = 3
#: the most member buckets of the heterogeneous subscriptions
BUCKET_COUNT = 5
#: the "many" events change this fraction of the members (rounded up)
MANY_MEMBERS_DIVISOR = 10
#: PARTITIONS_ADDED adds a partition to this fraction of the topics (rounded up)
ADDED_PARTITIONS_TOPIC_DIVISOR = 10

#: what an assignor returns, read only: member -> topic -> partitions (a dict, or a mapping building each member's
#: view when it is read)
Result = Mapping[str, Mapping[str, Sequence[int]]]
#: what the members hold going in: member -> topic -> sorted partitions
Held = dict[str, dict[str, list[int]]]

#: regroup's assignors by Kafka's enum name
REGROUP_ASSIGNORS: Mapping[str, Callable[[], PartitionAssignor]] = {
    "RANGE": ServerRangeAssignor,
    "UNIFORM": UniformAssignor,
}


# ---------------------------------------------------------------------------------------------------------------
# the grid


@dataclass(frozen=True, slots=True)
class GridCase:
    """One point of the grid."""

    members: int
    topics: int
    partitions: int
    distribution: str
    subscription: str
    rack: str
    assignor: str
    event: str

    @property
    def key(self) -> str:
        return (
            f"m{self.members}-t{self.topics}-p{self.partitions}-{self.distribution}-{self.subscription}"
            f"-{self.rack}-{self.assignor}-{self.event}"
        )

    @property
    def group(self) -> tuple[int, int, int, str, str, str]:
        """The case group: everything but assignor and event."""
        return (self.members, self.topics, self.partitions, self.distribution, self.subscription, self.rack)

    @staticmethod
    def parse(key: str) -> GridCase:
        """The case of a ``key`` (``m500-t50-p10000-EQUAL-HOMOGENEOUS-NONE-UNIFORM-JOIN_ONE``)."""
        parts = key.split("-")
        if len(parts) != 8 or parts[0][:1] != "m" or parts[1][:1] != "t" or parts[2][:1] != "p":
            raise ValueError(f"not a case key: {key!r}")
        case = GridCase(int(parts[0][1:]), int(parts[1][1:]), int(parts[2][1:]), *parts[3:])
        check_case(case)
        return case


@dataclass(frozen=True, slots=True)
class Run:
    """A product of parameter values, like one ``jmh.sh -p ...`` invocation of Kafka's benchmark."""

    name: str
    members: tuple[int, ...]
    topics: tuple[int, ...]
    partitions: tuple[int, ...]
    distributions: tuple[str, ...]
    subscriptions: tuple[str, ...]
    racks: tuple[str, ...]
    assignors: tuple[str, ...]
    events: tuple[str, ...]

    def cases(self) -> Iterator[GridCase]:
        for m, t, p, d, s, r, a, e in itertools.product(
            self.members,
            self.topics,
            self.partitions,
            self.distributions,
            self.subscriptions,
            self.racks,
            self.assignors,
            self.events,
        ):
            yield GridCase(m, t, p, d, s, r, a, e)


RUNS: Mapping[str, Run] = {
    run.name: run
    for run in (
        Run(
            "scaling",
            (5, 50, 500, 5000),
            (5, 50, 500, 5000),
            (10000,),
            ("EQUAL",),
            ("HOMOGENEOUS",),
            ("NONE",),
            ASSIGNORS,
            ("FULL", "STABLE", "JOIN_ONE"),
        ),
        Run(
            "events-large",
            (5000,),
            (500,),
            (10000,),
            DISTRIBUTIONS,
            ("HOMOGENEOUS", "HETEROGENEOUS_NESTED"),
            ("NONE",),
            ASSIGNORS,
            EVENTS,
        ),
        Run(
            "racks-large",
            (5000,),
            (500,),
            (10000,),
            ("EQUAL",),
            ("HOMOGENEOUS",),
            ("PROVIDED",),
            ASSIGNORS,
            ("FULL", "STABLE", "JOIN_ONE", "LEAVE_ONE"),
        ),
        Run("events-many-topics", (50,), (5000,), (10000,), DISTRIBUTIONS, ("HOMOGENEOUS",), RACKS, ASSIGNORS, EVENTS),
        Run("disjoint", (500,), (50,), (10000,), DISTRIBUTIONS, ("HETEROGENEOUS_DISJOINT",), RACKS, ASSIGNORS, EVENTS),
    )
}
DEFAULT_RUNS = ("scaling", "events-large", "racks-large", "events-many-topics")
QUICK = Run(
    "quick", (20,), (10,), (500,), ("SKEWED",), ("HOMOGENEOUS", "HETEROGENEOUS_NESTED"), RACKS, ASSIGNORS, EVENTS
)


def check_case(case: GridCase) -> None:
    """Reject values outside Kafka's enums and sizes the builders cannot honour."""
    for value, allowed in (
        (case.distribution, DISTRIBUTIONS),
        (case.subscription, SUBSCRIPTIONS),
        (case.rack, RACKS),
        (case.assignor, ASSIGNORS),
        (case.event, EVENTS),
    ):
        if value not in allowed:
            raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
    if case.members < 1 or case.topics < 1 or case.partitions < 1:
        raise ValueError(f"members, topics and partitions must be positive: {case.key}")


def select_cases(runs: Sequence[Run], overrides: Mapping[str, Any]) -> list[GridCase]:
    """The cases of the runs, each parameter replaced by ``overrides`` where given, duplicates dropped."""
    seen: dict[GridCase, None] = {}
    for run in runs:
        for case in replace(run, **overrides).cases():
            check_case(case)
            seen.setdefault(case, None)
    return list(seen)


def case_groups(cases: Iterable[GridCase]) -> list[list[GridCase]]:
    """The cases grouped by ``GridCase.group``, in first-seen order."""
    groups: dict[tuple[int, int, int, str, str, str], list[GridCase]] = {}
    for case in cases:
        groups.setdefault(case.group, []).append(case)
    return list(groups.values())


# ---------------------------------------------------------------------------------------------------------------
# building a case (the same rules as bench/java/AssignorGrid.java)


def topic_name(index: int) -> str:
    return f"topic-{index}"


def member_id(index: int) -> str:
    return f"member{index}"


def rack_id(index: int) -> str:
    return f"rack{index % RACK_COUNT}"


def round_half_up(value: float) -> int:
    """Java's ``Math.round`` for the values used here."""
    return math.floor(value + 0.5)


def skewed_tiers(topics: int) -> list[int]:
    """The tier sizes of ``SKEWED``: two thirds of the topics, then a third of the tier before, ..."""
    sizes: list[int] = []
    fraction = 2.0 / 3.0
    remaining = topics
    while remaining > 0:
        size = min(remaining, max(1, round_half_up(topics * fraction)))
        sizes.append(size)
        remaining -= size
        fraction /= 3.0
    return sizes


def _split(total: int, count: int) -> list[int]:
    """``total`` over ``count`` slots, within one of each other, the first slots taking the remainder."""
    quota, extra = divmod(total, count)
    return [quota + 1] * extra + [quota] * (count - extra)


def partition_counts(distribution: str, topics: int, partitions: int) -> list[int]:
    """Partitions of each topic (largest first, at least one; the total exceeds ``partitions`` when there
    are more topics than partitions)."""
    if distribution == "SKEWED" and topics > 1:
        tiers = skewed_tiers(topics)
        singles = tiers[0]
        others = topics - singles
        other_partitions = max(others, partitions - singles)
        weights = [size << (tier - 1) for tier, size in enumerate(tiers) if tier >= 1]
        weight = sum(weights)
        if weight > other_partitions:
            return _split(other_partitions, others) + [1] * singles
        counts: list[int] = []
        given_weight = 0
        given = 0
        for tier in range(len(tiers) - 1, 0, -1):
            given_weight += weights[tier - 1]
            share = other_partitions * given_weight // weight - given
            given += share
            counts.extend(_split(share, tiers[tier]))
        return counts + [1] * singles
    counts = [max(1, partitions // topics)] * topics
    for i in range(max(0, partitions - sum(counts))):
        counts[i % topics] += 1
    return counts


def divide_rounding_up(count: int, divisor: int) -> int:
    return (count + divisor - 1) // divisor


def previous_member_count(case: GridCase) -> int:
    """Members of the group before the event."""
    many = divide_rounding_up(case.members, MANY_MEMBERS_DIVISOR)
    return {
        "JOIN_ONE": case.members - 1,
        "JOIN_MANY": case.members - many,
        "LEAVE_ONE": case.members + 1,
        "LEAVE_MANY": case.members + many,
    }.get(case.event, case.members)


def topics_with_added_partition(case: GridCase) -> list[int]:
    """Indices of the topics that gained a partition before the event."""
    if case.event != "PARTITIONS_ADDED":
        return []
    k = divide_rounding_up(case.topics, ADDED_PARTITIONS_TOPIC_DIVISOR)
    return [i * case.topics // k for i in range(k)]


def bucket_count(case: GridCase) -> int:
    return min(BUCKET_COUNT, case.members, case.topics)


def bucket_topics(subscription: str, bucket: int, buckets: int, names: Sequence[str]) -> list[str]:
    """The topics the members of ``bucket`` subscribe to."""
    n = len(names)
    if subscription == "HOMOGENEOUS":
        return list(names)
    if subscription == "HETEROGENEOUS_DISJOINT":
        return list(names[n * bucket // buckets : n * (bucket + 1) // buckets])
    return list(names[: n * (bucket + 1) // buckets])


def partition_racks(counts: Mapping[str, int]) -> dict[str, tuple[frozenset[str], ...]]:
    """Replica racks of every partition: brokers ``p mod 3`` and ``(p+1) mod 3``, one broker per rack."""
    shapes = [frozenset({rack_id(p), rack_id(p + 1)}) for p in range(RACK_COUNT)]
    return {topic: tuple(shapes[p % RACK_COUNT] for p in range(n)) for topic, n in counts.items()}


def build_spec(case: GridCase, members: int, added: Sequence[int], held: Result | None) -> tuple[GroupSpec, Held]:
    """The group spec with ``members`` members (bucket count from ``case``), the partitions added to the topics
    ``added``, each member holding what ``held`` gives it; also returns what the members hold going in.

    Built as the coordinator builds a target computation's spec: every member gets its own tuple of its
    subscribed topics (sorted) and its held partitions as sorted tuples, by topic.
    """
    names = [topic_name(i) for i in range(case.topics)]
    counts = partition_counts(case.distribution, case.topics, case.partitions)
    for index in added:
        counts[index] += 1
    topics = dict(zip(names, counts, strict=True))
    buckets = bucket_count(case)
    subscriptions = [sorted(bucket_topics(case.subscription, b, buckets, names)) for b in range(buckets)]
    subs: dict[str, MemberSubscription] = {}
    holding: Held = {}
    for i in range(members):
        mid = member_id(i)
        previous = (held or {}).get(mid, {})
        owned = {t: tuple(ps) for t, ps in sorted(previous.items()) if ps}
        holding[mid] = {t: list(ps) for t, ps in owned.items()}
        subs[mid] = MemberSubscription(
            topics=tuple(subscriptions[i % buckets]),
            owned=owned,
            rack=rack_id(i) if case.rack == "PROVIDED" else None,
        )
    return GroupSpec(topics=topics, members=subs, partition_racks=partition_racks(topics)), holding


def build_case(case: GridCase, assignor: PartitionAssignor | None = None) -> tuple[GroupSpec, Held]:
    """The spec of the timed call and what its members hold going in. For every event but ``FULL``, the
    previous group is built and assigned first with ``assignor`` (by default the case's regroup assignor)."""
    held: Result | None = None
    if case.event != "FULL":
        before, _ = build_spec(case, previous_member_count(case), (), None)
        held = (assignor or REGROUP_ASSIGNORS[case.assignor]()).assign(before)
        del before
    return build_spec(case, case.members, topics_with_added_partition(case), held)


def fingerprint(spec: GroupSpec, holding: Held) -> dict[str, int]:
    """What both sides must agree on: partitions, subscribed partitions over all members, partitions held."""
    return {
        "partitions": sum(spec.topics.values()),
        "subscribed": sum(spec.topics[t] for s in spec.members.values() for t in s.topics),
        "held": sum(len(ps) for per_topic in holding.values() for ps in per_topic.values()),
    }


def fingerprint_keys(case: GridCase) -> tuple[str, ...]:
    """The fingerprint entries both sides must agree on: what the leavers held depends on the assignor's
    previous output, so ``held`` is compared only when every previous member is still there."""
    if case.event.startswith("LEAVE"):
        return ("partitions", "subscribed")
    return ("partitions", "subscribed", "held")


def outcome(spec: GroupSpec, holding: Held, result: Result) -> dict[str, Any]:
    """Checks and summary of one assignment: every subscribed partition given once to a subscriber, the least
    and most partitions per member, and the held partitions taken from their holder (``revoked``)."""
    owners: dict[tuple[str, int], str] = {}
    bad = 0
    for mid, per_topic in result.items():
        sub = spec.members.get(mid)
        for topic, ps in per_topic.items():
            if sub is None or topic not in sub.topics:
                bad += len(ps)
            for p in ps:
                if (topic, p) in owners or not 0 <= p < spec.topics.get(topic, 0):
                    bad += 1
                owners[(topic, p)] = mid
    subscribed = {t for s in spec.members.values() for t in s.topics}
    expected = sum(spec.topics[t] for t in subscribed)
    loads = [sum(map(len, result.get(m, {}).values())) for m in spec.members]
    revoked = sum(
        1 for mid, per_topic in holding.items() for t, ps in per_topic.items() for p in ps if owners.get((t, p)) != mid
    )
    return {
        "valid": bad == 0 and len(owners) == expected,
        "min": min(loads),
        "max": max(loads),
        "revoked": revoked,
    }


# ---------------------------------------------------------------------------------------------------------------
# the regroup side


def timed_calls(fn: Callable[[], object], repeat: int, first_s: float, budget_s: float) -> list[float]:
    """Wall-clock seconds of up to ``repeat`` calls (fewer when ``first_s`` says a call is slow), each after a
    collection; at least one."""
    n = max(1, min(repeat, int(budget_s // max(first_s, 1e-9))))
    times: list[float] = []
    for _ in range(n):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
        del result  # freed outside the timed window
    return times


def assign_and_read(assignor: PartitionAssignor, spec: GroupSpec) -> Result:
    """The timed call: ``assign``, then every member's assignment read once, as the coordinator reads them next
    (a dictionary lookup for a plain result; building the member's view for one that builds views on read)."""
    result: Result = assignor.assign(spec)
    for member in spec.members:
        result.get(member)
    return result


def run_regroup(case: GridCase, warmup: int, repeat: int, budget_s: float) -> dict[str, Any]:
    """Build the case, warm up, time ``assign_and_read``; one result row."""
    assignor = REGROUP_ASSIGNORS[case.assignor]()
    start = time.perf_counter()
    spec, holding = build_case(case, assignor)
    setup_s = time.perf_counter() - start
    start = time.perf_counter()
    result = assign_and_read(assignor, spec)
    first_s = time.perf_counter() - start
    row: dict[str, Any] = {"case": case.key, "side": "regroup", "setup_s": setup_s, "first_s": first_s}
    row.update(fingerprint(spec, holding))
    row.update(outcome(spec, holding, result))
    del result
    calls, warm_start = 1, time.perf_counter()
    while calls < warmup and time.perf_counter() - warm_start + first_s <= budget_s:
        assign_and_read(assignor, spec)
        calls += 1
    row["warmup_calls"] = calls
    times = timed_calls(lambda: assign_and_read(assignor, spec), repeat, first_s, budget_s)
    row.update(median_s=statistics.median(times), best_s=min(times), n=len(times))
    return row


def profile_case(case: GridCase, top: int) -> None:
    """cProfile one regroup ``assign_and_read`` call of the case (after one warm-up call)."""
    assignor = REGROUP_ASSIGNORS[case.assignor]()
    spec, _ = build_case(case, assignor)
    assign_and_read(assignor, spec)
    profiler = cProfile.Profile()
    profiler.enable()
    assign_and_read(assignor, spec)
    profiler.disable()
    for order in ("cumulative", "tottime"):
        print(f"--- {case.key}, sorted by {order} ---")
        pstats.Stats(profiler, stream=sys.stdout).strip_dirs().sort_stats(order).print_stats(top)


# ---------------------------------------------------------------------------------------------------------------
# the Java side


def java_classpath(java_dir: Path) -> str:
    jars = [java_dir / "kafka-clients.jar", java_dir / "kafka-server-assignors.jar"]
    jars += sorted((java_dir / "lib").glob("*.jar"))
    return os.pathsep.join(str(j) for j in jars)


def java_unavailable(java_dir: Path) -> str | None:
    """Why the Java side cannot run here, or ``None``."""
    if not (java_dir / "kafka-server-assignors.jar").is_file() or not (java_dir / "kafka-clients.jar").is_file():
        return f"Kafka's jars not found in {java_dir}"
    for tool in ("javac", "java"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    return None


class JavaGrid:
    """``AssignorGrid`` in one JVM, fed case lines on its standard input, one JSON line back per case."""

    def __init__(
        self, java_dir: Path, classes: Path, heap: str, warmup: int, warmup_ms: int, repeat: int, budget_s: float
    ) -> None:
        classpath = java_classpath(java_dir)
        compiled = subprocess.run(
            ["javac", "-nowarn", "-cp", classpath, "-d", str(classes), str(JAVA_SOURCE)],
            capture_output=True,
            text=True,
        )
        if compiled.returncode != 0:
            raise RuntimeError(f"javac failed: {compiled.stderr.strip()}")
        command = [
            "java",
            f"-Xmx{heap}",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{classes}{os.pathsep}{classpath}",
            "AssignorGrid",
            "--stdin",
            "--warmup",
            str(warmup),
            "--warmup-ms",
            str(warmup_ms),
            "--repeat",
            str(repeat),
            "--budget-s",
            str(budget_s),
        ]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.version = self._read()["java"]

    def _read(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"the Java side stopped (exit {self.process.wait()})")
        payload: dict[str, Any] = json.loads(line)
        return payload

    def run(self, case: GridCase) -> dict[str, Any]:
        stdin: IO[str] | None = self.process.stdin
        assert stdin is not None
        stdin.write(case.key + "\n")
        stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# ---------------------------------------------------------------------------------------------------------------
# report


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 0.001:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 0.1:
        return f"{seconds * 1000:.2f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.2f} s"


def fmt_ratio(java: float | None, regroup: float | None) -> str:
    if java is None or regroup is None or regroup <= 0:
        return "-"
    return fmt_x(java / regroup)


def fmt_x(ratio: float) -> str:
    if ratio >= 10:
        return f"{ratio:.0f}x"
    return f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows]
    return "\n".join([line, rule, *body])


SHORT = {
    "HOMOGENEOUS": "homo",
    "HETEROGENEOUS_DISJOINT": "disjoint",
    "HETEROGENEOUS_NESTED": "nested",
    "PROVIDED": "racks",
    "NONE": "-",
}


def ratio_table(cases: Sequence[GridCase], rows: Mapping[tuple[str, str], Mapping[str, Any]]) -> str:
    """One line per case: parameters, Java and regroup medians, Java/regroup, revoked partitions per side."""
    body: list[list[str]] = []
    for case in cases:
        java = rows.get((case.key, "java"), {})
        ours = rows.get((case.key, "regroup"), {})
        body.append(
            [
                str(case.members),
                str(case.topics),
                str(case.partitions),
                case.distribution,
                SHORT.get(case.subscription, case.subscription),
                SHORT.get(case.rack, case.rack),
                case.assignor,
                case.event,
                fmt_s(java.get("median_s")) if java else "-",
                fmt_s(ours.get("median_s")) if ours else "-",
                fmt_ratio(java.get("median_s"), ours.get("median_s")),
                f"{java.get('revoked', '-')} / {ours.get('revoked', '-')}",
            ]
        )
    headers = [
        "members",
        "topics",
        "partitions",
        "distribution",
        "subscription",
        "rack",
        "assignor",
        "event",
        "Java",
        "regroup",
        "Java/regroup",
        "revoked J / r",
    ]
    return table(headers, body)


def summary_lines(cases: Sequence[GridCase], rows: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[str]:
    """Geometric means of Java/regroup per assignor and event, over the cases both sides ran."""
    by: dict[tuple[str, str], list[float]] = {}
    for case in cases:
        java = rows.get((case.key, "java"), {}).get("median_s")
        ours = rows.get((case.key, "regroup"), {}).get("median_s")
        if java and ours:
            by.setdefault((case.assignor, case.event), []).append(java / ours)
            by.setdefault((case.assignor, "all"), []).append(java / ours)
    lines = []
    for (assignor, event), ratios in sorted(by.items()):
        mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        wins = sum(r > 1 for r in ratios)
        lines.append(
            f"{assignor:7} {event:16} geometric mean Java/regroup {fmt_x(mean)} over {len(ratios)} cases, "
            f"regroup faster in {wins}, range {fmt_x(min(ratios))}..{fmt_x(max(ratios))}"
        )
    return lines


def report(
    cases: Sequence[GridCase], rows: Mapping[tuple[str, str], Mapping[str, Any]], notes: Sequence[str], out: str | None
) -> None:
    """Print the table, the geometric means and the notes; write the table and the means to ``out``."""
    markdown = ratio_table(cases, rows)
    summary = summary_lines(cases, rows)
    print()
    print(markdown)
    if summary:
        print()
        print("\n".join(summary))
    for note in notes:
        print(f"note: {note}")
    if out:
        Path(out).write_text(markdown + "\n" + "".join(f"\n    {line}" for line in summary) + "\n")


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
        "regroup": pkg("regroup"),
        "regroup_path": str(Path(regroup.__file__).parent),
        "loadavg_at_start": os.getloadavg(),
    }


# ---------------------------------------------------------------------------------------------------------------
# entry point


def ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v)


def names(allowed: Sequence[str], *, upper: bool = True) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        values = tuple(v.strip().upper() if upper else v.strip() for v in text.split(",") if v.strip())
        unknown = [v for v in values if v not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"{', '.join(unknown)}: expected some of {', '.join(allowed)}")
        return values

    return parse


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small subset for a smoke run")
    parser.add_argument("--runs", type=names([*RUNS], upper=False), help=f"runs (default {','.join(DEFAULT_RUNS)})")
    parser.add_argument("--members", type=ints, help="member counts, replacing every run's")
    parser.add_argument("--topics", type=ints, help="topic counts, replacing every run's")
    parser.add_argument("--partitions", type=ints, help="partition counts (over all topics), replacing every run's")
    parser.add_argument("--distributions", type=names(DISTRIBUTIONS), help="EQUAL,SKEWED")
    parser.add_argument("--subscriptions", type=names(SUBSCRIPTIONS), help=",".join(SUBSCRIPTIONS))
    parser.add_argument("--racks", type=names(RACKS), help="NONE,PROVIDED")
    parser.add_argument("--assignors", type=names(ASSIGNORS), help="RANGE,UNIFORM")
    parser.add_argument("--events", type=names(EVENTS), help=",".join(EVENTS))
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls before timing (default 2)")
    parser.add_argument("--java-warmup-ms", type=int, default=500, help="Java: warm up at least this long (500)")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls, median reported (default 5)")
    parser.add_argument("--budget-s", type=float, default=6.0, help="fewer calls past this per case and side (6)")
    parser.add_argument("--no-java", action="store_true", help="regroup only")
    parser.add_argument("--java-dir", type=Path, default=DEFAULT_JAVA_DIR, help="Kafka's jars (../shared/java)")
    parser.add_argument("--java-heap", default="6g", help="the JVM's -Xmx (default 6g)")
    parser.add_argument("--json", metavar="OUT", help="write the rows and the machine facts to OUT")
    parser.add_argument("--markdown", metavar="OUT", help="write the table to OUT")
    parser.add_argument("--list", action="store_true", help="print the selected case keys and exit")
    parser.add_argument("--report", metavar="IN", help="print (and --markdown) the table of a --json file and exit")
    parser.add_argument("--profile", metavar="CASE", help="cProfile one regroup assign() of the case key and exit")
    parser.add_argument("--top", type=int, default=25, help="rows of profile output (with --profile)")
    return parser.parse_args(argv)


def chosen_cases(args: argparse.Namespace) -> list[GridCase]:
    overrides = {
        field: value
        for field in (
            "members",
            "topics",
            "partitions",
            "distributions",
            "subscriptions",
            "racks",
            "assignors",
            "events",
        )
        if (value := getattr(args, field)) is not None
    }
    runs = [QUICK] if args.quick else [RUNS[name] for name in (args.runs or DEFAULT_RUNS)]
    return select_cases(runs, overrides)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.profile:
        profile_case(GridCase.parse(args.profile), args.top)
        return 0
    if args.report:
        saved = json.loads(Path(args.report).read_text())
        report(
            [GridCase.parse(c["key"]) for c in saved["cases"]],
            {(r["case"], r["side"]): r for r in saved["rows"]},
            saved.get("notes", []),
            args.markdown,
        )
        return 0
    cases = chosen_cases(args)
    if args.list:
        print("\n".join(c.key for c in cases))
        return 0

    facts = machine_facts()
    print("machine: " + ", ".join(f"{k}={v}" for k, v in facts.items()), flush=True)
    notes: list[str] = []
    java: JavaGrid | None = None
    why_not = "--no-java" if args.no_java else java_unavailable(args.java_dir)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if why_not is None:
            classes = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="regroup-grid-")))
            try:
                java = JavaGrid(
                    args.java_dir, classes, args.java_heap, args.warmup, args.java_warmup_ms, args.repeat, args.budget_s
                )
            except RuntimeError as exc:
                print(exc, file=sys.stderr)
                why_not = str(exc).splitlines()[0]
            else:
                stack.callback(java.close)
                facts["java"] = java.version
        if why_not is not None:
            print(f"Java side skipped: {why_not}", flush=True)
            notes.append(f"Java side skipped: {why_not}")
        groups = case_groups(cases)
        for index, group in enumerate(groups, 1):
            sides: list[tuple[str, Callable[[GridCase], dict[str, Any]]]] = []
            if java is not None:
                sides.append(("java", java.run))
            sides.append(("regroup", lambda c: run_regroup(c, args.warmup, args.repeat, args.budget_s)))
            for side, run in sides:
                for case in group:
                    rows[(case.key, side)] = run(case)
                gc.collect()
            for case in group:
                line = f"[{index}/{len(groups)}] {case.key}: regroup {fmt_s(rows[(case.key, 'regroup')]['median_s'])}"
                if java is not None:
                    j, r = rows[(case.key, "java")], rows[(case.key, "regroup")]
                    line += f", Java {fmt_s(j['median_s'])}, Java/regroup {fmt_ratio(j['median_s'], r['median_s'])}"
                    mismatch = {k: (j.get(k), r[k]) for k in fingerprint_keys(case) if j.get(k) != r[k]}
                    if mismatch:
                        notes.append(f"{case.key}: inputs differ between Java and regroup (Java, regroup): {mismatch}")
                print(line, file=sys.stderr, flush=True)
            for case in group:
                for side, _ in sides:
                    if rows[(case.key, side)].get("valid") is False:
                        notes.append(f"{case.key}: {side} returned an INVALID assignment")
    elapsed = time.monotonic() - started

    report(cases, rows, notes, args.markdown)
    print(f"{len(cases)} cases in {elapsed:.0f} s")
    if args.json:
        document = {
            "command": " ".join(
                [Path(sys.executable).name, *(sys.argv if argv is None else ["bench/assignor_grid.py", *argv])]
            ),
            "machine": facts,
            "warmup": args.warmup,
            "java_warmup_ms": args.java_warmup_ms,
            "repeat": args.repeat,
            "elapsed_s": elapsed,
            "cases": [asdict(c) | {"key": c.key} for c in cases],
            "rows": list(rows.values()),
            "notes": notes,
        }
        Path(args.json).write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
