"""Differential test of rack-aware ``sticky`` and ``cooperative-sticky`` against Kafka's own Java assignors.

Kafka's ``StickyAssignor`` and ``CooperativeStickyAssignor`` (``../shared/java``, built from Kafka's source) run
through ``ConsumerPartitionAssignor.assign(Cluster, GroupSubscription)`` on a few hundred seeded rack-aware
groups, batched into one JVM (``tests/assignors_java/StickyOracle.java``: JSON lines in, JSON lines out).

* Same subscriptions: Kafka's assignment is deterministic, so ours must be the same assignment, for both
  strategies (conflicting claims included for cooperative-sticky, whose generations Kafka compares
  symmetrically).
* Differing subscriptions: Kafka's assignment is a heuristic. Where it is valid, ours must be at least as
  good on the priorities in order (balance, matched partitions kept, rack mismatches, other partitions
  kept); where the eager results agree, the cooperative ones must agree too. Kafka's heuristic sometimes
  hands a partition back to a previous owner (of an older generation) that no longer subscribes to its
  topic: those results are invalid and only counted.

Skipped where Kafka's Java client or a JDK is not installed. ``-s`` prints the tally.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from regroup.assignors.consumer_protocol import encode_sticky_user_data
from regroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from regroup.assignors.metrics import validity_errors
from regroup.assignors.rack_sticky import credited_claims
from regroup.assignors.racks import sticky_racks
from regroup.assignors.spec import Assignment, GroupSpec, MemberSubscription
from regroup.assignors.sticky import StickyAssignor

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
JAVA = Path(os.environ.get("REGROUP_KAFKA_JAVA", ROOT.parent / "shared" / "java"))
SOURCE = ROOT / "tests" / "assignors_java" / "StickyOracle.java"
GROUPS = 300  # per kind (same / differing subscriptions)
RACKS = ("a", "b", "c")
UNASSIGNED = "is subscribed but unassigned"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command running the Java oracle (compiled once per session)."""
    jars = [JAVA / "kafka-clients.jar", *sorted((JAVA / "lib").glob("*.jar"))]
    if not jars[0].is_file() or shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("Kafka's Java client or a JDK is not installed (../shared/java)")
    classpath = ":".join(str(j) for j in jars)
    out = tmp_path_factory.mktemp("sticky-oracle")
    subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(out), str(SOURCE)], check=True, timeout=120)
    return ["java", "-cp", f"{out}:{classpath}", "-Dorg.slf4j.simpleLogger.defaultLogLevel=off", "StickyOracle"]


def run_kafka(command: list[str], inputs: Sequence[Mapping[str, Any]]) -> list[Assignment]:
    lines = "".join(json.dumps(i) + "\n" for i in inputs)
    done = subprocess.run(command, input=lines, capture_output=True, text=True, timeout=240, check=True)
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == len(inputs), done.stderr[-2000:]
    for result in results:
        assert "error" not in result, result
    return [{m: {t: list(ps) for t, ps in per.items()} for m, per in r["assignment"].items()} for r in results]


# ---------------------------------------------------------------------------------------------------------------
# inputs


Base = tuple[
    dict[str, int],
    dict[str, tuple[frozenset[str], ...]],
    dict[str, tuple[list[str], dict[str, list[int]], str | None, int]],
]


def random_group(rng: random.Random, *, same: bool, conflicts: bool) -> Base:
    """Topics with replicas on one or two of three racks (some on none), members on a rack or not, previous
    owners of two generations; with ``conflicts``, some partitions are claimed by a second member too."""
    topics = {f"topic-{i}": rng.randint(1, 9) for i in range(rng.randint(1, 4))}
    names = sorted(topics)
    replication = rng.randint(1, 2)
    partition_racks = {
        t: tuple(frozenset() if rng.random() < 0.05 else frozenset(rng.sample(RACKS, replication)) for _ in range(n))
        for t, n in topics.items()
    }
    members = [f"consumer-{i:02d}" for i in range(rng.randint(2, 9))]
    subscriptions = {m: names if same else sorted(rng.sample(names, rng.randint(1, len(names)))) for m in members}
    owned: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    if rng.random() < 0.85:
        for t, n in topics.items():
            for p in range(n):
                if rng.random() < 0.8:
                    holders = [m for m in members if t in subscriptions[m] or rng.random() < 0.1]
                    if holders:
                        owned[rng.choice(holders)].setdefault(t, []).append(p)
                        if conflicts and rng.random() < 0.15:
                            owned[rng.choice(members)].setdefault(t, []).append(p)
    group = {
        m: (subscriptions[m], owned[m], rng.choice((None, "a", "b", "c", "a", "b")), rng.choice((1, 1, 2)))
        for m in members
    }
    return topics, partition_racks, group


def spec_of(strategy: str, base: Base) -> GroupSpec:
    topics, partition_racks, group = base
    members = {}
    for m, (subscribed, owned, rack, generation) in group.items():
        clean = {t: sorted(set(ps)) for t, ps in owned.items()}
        if strategy == "sticky":
            user_data = encode_sticky_user_data(clean, generation) if clean else None
            members[m] = MemberSubscription.of(subscribed, rack=rack, user_data=user_data)
        else:
            members[m] = MemberSubscription.of(subscribed, clean, generation=generation, rack=rack)
    return GroupSpec(topics=topics, members=members, partition_racks=partition_racks)


def kafka_input(strategy: str, spec: GroupSpec) -> dict[str, Any]:
    assert spec.partition_racks is not None
    members = {}
    for m in sorted(spec.members):
        sub = spec.members[m]
        members[m] = {
            "topics": list(sub.topics),
            "rack": sub.rack,
            "owned": {t: list(ps) for t, ps in sub.owned.items()},
            "generation": sub.generation,
            "user_data": base64.b64encode(sub.user_data).decode() if sub.user_data else None,
        }
    topics = {t: [sorted(r) for r in spec.partition_racks[t]] for t in spec.topics}
    return {"strategy": strategy, "topics": topics, "members": members}


def rack_aware_groups(rng: random.Random, count: int, *, same: bool, conflicts: bool) -> list[Base]:
    out: list[Base] = []
    while len(out) < count:
        base = random_group(rng, same=same, conflicts=conflicts)
        if sticky_racks(spec_of("cooperative-sticky", base)) is not None:
            out.append(base)
    return out


def ours(strategy: str, spec: GroupSpec) -> Assignment:
    if strategy == "sticky":
        return StickyAssignor().assign(spec)
    return CooperativeStickyAssignor().assign(spec)


# ---------------------------------------------------------------------------------------------------------------
# priorities


def priorities(spec: GroupSpec, strategy: str, assignment: Assignment) -> tuple[list[int], int, int, int]:
    """(counts decreasing, -matched kept, mismatches, -other kept): smaller is better, in this order."""
    reader = StickyAssignor() if strategy == "sticky" else CooperativeStickyAssignor()
    claims = {m: reader.member_claim(sub) for m, sub in spec.members.items()}
    by_member, _ = credited_claims(spec, claims)
    owner = {tp: m for m, tps in by_member.items() for tp in tps}
    assert spec.partition_racks is not None
    matched = other = bad = 0
    for m, per in assignment.items():
        rack = spec.members[m].rack
        for t, ps in per.items():
            for p in ps:
                miss = rack is not None and rack not in spec.partition_racks[t][p]
                bad += miss
                if owner.get((t, p)) == m:
                    if miss:
                        other += 1
                    else:
                        matched += 1
    counts = sorted((sum(len(ps) for ps in per.values()) for per in assignment.values()), reverse=True)
    return counts, -matched, bad, -other


LEVELS = ("balance", "matched kept", "mismatches", "other kept")


# ---------------------------------------------------------------------------------------------------------------
# the comparison


def test_same_subscriptions_match_kafka_exactly(oracle: list[str]) -> None:
    rng = random.Random(881)
    cases: list[tuple[str, GroupSpec]] = []
    for base in rack_aware_groups(rng, GROUPS, same=True, conflicts=False):
        cases += [(s, spec_of(s, base)) for s in ("sticky", "cooperative-sticky")]
    # cooperative-sticky also with partitions claimed twice (Kafka compares the generations symmetrically)
    for base in rack_aware_groups(rng, GROUPS // 3, same=True, conflicts=True):
        cases.append(("cooperative-sticky", spec_of("cooperative-sticky", base)))
    kafka = run_kafka(oracle, [kafka_input(s, spec) for s, spec in cases])
    differing = [(s, spec, k, got) for (s, spec), k in zip(cases, kafka, strict=True) if (got := ours(s, spec)) != k]
    print(f"\nsame subscriptions: {len(cases) - len(differing)}/{len(cases)} identical to Kafka's")
    assert differing == []


def test_differing_subscriptions_never_worse_than_kafka(oracle: list[str]) -> None:
    rng = random.Random(3_5_0)
    bases = rack_aware_groups(rng, GROUPS, same=False, conflicts=False)
    cases = [(s, spec_of(s, base)) for base in bases for s in ("sticky", "cooperative-sticky")]
    kafka = run_kafka(oracle, [kafka_input(s, spec) for s, spec in cases])
    tally: Counter[str] = Counter()
    for i in range(0, len(cases), 2):
        (_, eager_spec), (_, coop_spec) = cases[i], cases[i + 1]
        eager_kafka, coop_kafka = kafka[i], kafka[i + 1]
        eager_ours, coop_ours = ours("sticky", eager_spec), ours("cooperative-sticky", coop_spec)
        assert validity_errors(eager_spec, eager_ours) == []
        assert [e for e in validity_errors(coop_spec, coop_ours) if not e.endswith(UNASSIGNED)] == []
        if validity_errors(eager_spec, eager_kafka):
            tally["Kafka's result invalid"] += 1
            continue
        if eager_ours == eager_kafka:
            tally["identical"] += 1
            assert coop_ours == coop_kafka  # same assignment, same cooperative withholding
            continue
        mine, theirs = priorities(eager_spec, "sticky", eager_ours), priorities(eager_spec, "sticky", eager_kafka)
        assert mine <= theirs, (eager_spec, eager_ours, eager_kafka)
        if mine == theirs:
            tally["as good (other tie-breaks)"] += 1
        else:
            level = next(n for n, a, b in zip(LEVELS, mine, theirs, strict=True) if a != b)
            tally[f"ours better on {level}"] += 1
    print(
        f"\ndiffering subscriptions, {len(bases)} groups: " + ", ".join(f"{k}: {v}" for k, v in sorted(tally.items()))
    )
    assert tally["identical"] > 0
