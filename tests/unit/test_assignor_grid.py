"""bench/assignor_grid.py: its case builders give each grid parameter the meaning Kafka's
``ConsumerAssignorBenchmark`` gives it, and ``--quick`` runs end to end on the regroup side."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from regroup.assignors.spec import GroupSpec

BENCH = Path(__file__).resolve().parents[2] / "bench" / "assignor_grid.py"


@pytest.fixture(scope="module")
def grid() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("assignor_grid", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["assignor_grid"] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("assignor_grid", None)


def case(grid: ModuleType, key: str) -> object:
    return grid.GridCase.parse(key)


def holders(holding: dict[str, dict[str, list[int]]]) -> set[str]:
    return {m for m, per_topic in holding.items() if any(per_topic.values())}


def test_join_one_adds_exactly_one_member_holding_nothing(grid: ModuleType) -> None:
    spec, holding = grid.build_case(case(grid, "m50-t10-p500-EQUAL-HOMOGENEOUS-NONE-UNIFORM-JOIN_ONE"))
    assert len(spec.members) == 50
    empty = [m for m, sub in spec.members.items() if not sub.owned]
    assert empty == ["member49"]
    assert holders(holding) == set(spec.members) - {"member49"}
    # everyone else holds the previous target, which covered every partition
    assert sum(len(ps) for per_topic in holding.values() for ps in per_topic.values()) == 500


def test_join_many_adds_a_tenth_rounded_up(grid: ModuleType) -> None:
    spec, _ = grid.build_case(case(grid, "m41-t10-p500-EQUAL-HOMOGENEOUS-NONE-RANGE-JOIN_MANY"))
    empty = sorted((m for m, sub in spec.members.items() if not sub.owned), key=lambda m: int(m[6:]))
    assert empty == [f"member{i}" for i in range(36, 41)]  # ceil(41 / 10) = 5 joiners, the highest indices


@pytest.mark.parametrize(("event", "leavers"), [("LEAVE_ONE", 1), ("LEAVE_MANY", 5)])
def test_leave_events_remove_the_stated_number(grid: ModuleType, event: str, leavers: int) -> None:
    c = case(grid, f"m50-t10-p500-EQUAL-HOMOGENEOUS-NONE-UNIFORM-{event}")
    assert grid.previous_member_count(c) == 50 + leavers
    spec, holding = grid.build_case(c)
    assert set(spec.members) == {f"member{i}" for i in range(50)}
    assert all(sub.owned for sub in spec.members.values())
    # the leavers were the highest indices of the group before, and what they held is held by nobody now
    before, _ = grid.build_spec(c, 50 + leavers, (), None)
    previous = grid.REGROUP_ASSIGNORS["UNIFORM"]().assign(before)
    left = sum(len(ps) for m in range(50, 50 + leavers) for ps in previous[f"member{m}"].values())
    held = sum(len(ps) for per_topic in holding.values() for ps in per_topic.values())
    assert left > 0 and held == 500 - left


def test_stable_holds_the_assignors_own_output(grid: ModuleType) -> None:
    c = case(grid, "m20-t10-p500-SKEWED-HETEROGENEOUS_NESTED-PROVIDED-UNIFORM-STABLE")
    spec, holding = grid.build_case(c)
    result = grid.REGROUP_ASSIGNORS["UNIFORM"]().assign(spec)
    assert grid.outcome(spec, holding, result)["revoked"] == 0
    assert {m: {t: ps for t, ps in per_topic.items() if ps} for m, per_topic in result.items()} == holding


def test_partitions_added_grows_a_tenth_of_the_topics_by_one(grid: ModuleType) -> None:
    base = grid.partition_counts("EQUAL", 25, 1000)
    spec, holding = grid.build_case(case(grid, "m20-t25-p1000-EQUAL-HOMOGENEOUS-NONE-RANGE-PARTITIONS_ADDED"))
    grown = [i for i in range(25) if spec.topics[f"topic-{i}"] == base[i] + 1]
    assert grown == [0, 8, 16]  # ceil(25 / 10) = 3 topics, spread over the topics
    assert all(spec.topics[f"topic-{i}"] == base[i] for i in range(25) if i not in grown)
    # what the members hold comes from before: the new partitions are held by nobody
    held = {(t, p) for per_topic in holding.values() for t, ps in per_topic.items() for p in ps}
    assert len(held) == 1000
    assert all((f"topic-{i}", base[i]) not in held for i in grown)


def test_full_holds_nothing(grid: ModuleType) -> None:
    spec, holding = grid.build_case(case(grid, "m20-t10-p500-EQUAL-HOMOGENEOUS-NONE-UNIFORM-FULL"))
    assert not any(sub.owned for sub in spec.members.values()) and not holders(holding)


def subscriptions(spec: GroupSpec) -> dict[int, set[str]]:
    """Bucket (member index mod 5) -> its topics, checking that a bucket's members agree."""
    out: dict[int, set[str]] = {}
    for member, sub in spec.members.items():
        topics = set(sub.topics)
        assert out.setdefault(int(member[6:]) % 5, topics) == topics
    return out


def test_disjoint_subscriptions_cover_the_topics_once(grid: ModuleType) -> None:
    spec, _ = grid.build_case(case(grid, "m23-t12-p500-EQUAL-HETEROGENEOUS_DISJOINT-NONE-RANGE-FULL"))
    buckets = subscriptions(spec)
    assert len(buckets) == 5
    seen: set[str] = set()
    for topics in buckets.values():
        assert topics and seen.isdisjoint(topics)
        seen |= topics
    assert seen == set(spec.topics)


def test_nested_subscriptions_grow_bucket_by_bucket(grid: ModuleType) -> None:
    spec, _ = grid.build_case(case(grid, "m23-t12-p500-EQUAL-HETEROGENEOUS_NESTED-NONE-RANGE-FULL"))
    buckets = subscriptions(spec)
    chain = [buckets[b] for b in range(5)]
    assert all(a < b for a, b in itertools.pairwise(chain))
    assert chain[-1] == set(spec.topics) and "topic-0" in chain[0]


def test_bucket_count_follows_the_smaller_group(grid: ModuleType) -> None:
    spec, _ = grid.build_case(case(grid, "m3-t12-p500-EQUAL-HETEROGENEOUS_DISJOINT-NONE-RANGE-FULL"))
    assert [len(sub.topics) for sub in spec.members.values()] == [4, 4, 4]


def test_homogeneous_subscribes_everyone_to_everything(grid: ModuleType) -> None:
    spec, _ = grid.build_case(case(grid, "m7-t12-p500-SKEWED-HOMOGENEOUS-NONE-UNIFORM-FULL"))
    assert all(set(sub.topics) == set(spec.topics) for sub in spec.members.values())


@pytest.mark.parametrize(("topics", "partitions"), [(5, 5000), (50, 10000), (500, 20000), (5000, 10000)])
def test_skewed_counts_are_skewed(grid: ModuleType, topics: int, partitions: int) -> None:
    counts = grid.partition_counts("SKEWED", topics, partitions)
    assert len(counts) == topics and sum(counts) == partitions
    assert counts == sorted(counts, reverse=True)
    singles = round(topics * 2 / 3)
    assert counts.count(1) == singles  # two thirds of the topics have one partition
    assert counts[0] > counts[topics - singles - 1] > 1  # the largest beyond the smallest of the other topics


def test_skewed_with_too_few_partitions_splits_them_equally(grid: ModuleType) -> None:
    counts = grid.partition_counts("SKEWED", 5000, 5000)
    assert counts == [1] * 5000
    counts = grid.partition_counts("SKEWED", 500, 600)
    assert sum(counts) == 600 and set(counts[: 500 - 333]) <= {1, 2} and counts[500 - 333 :] == [1] * 333


def test_equal_counts_spread_the_remainder_from_the_first_topic(grid: ModuleType) -> None:
    assert grid.partition_counts("EQUAL", 3, 10) == [4, 3, 3]
    assert grid.partition_counts("EQUAL", 10, 5) == [1] * 10  # every topic keeps a partition


def test_racks_are_laid_out_as_kafkas_benchmark_lays_them(grid: ModuleType) -> None:
    spec, _ = grid.build_case(case(grid, "m7-t3-p30-EQUAL-HOMOGENEOUS-PROVIDED-UNIFORM-FULL"))
    assert [spec.members[f"member{i}"].rack for i in range(7)] == [f"rack{i % 3}" for i in range(7)]
    assert spec.partition_racks is not None
    assert spec.partition_racks["topic-1"][:4] == (
        frozenset({"rack0", "rack1"}),
        frozenset({"rack1", "rack2"}),
        frozenset({"rack2", "rack0"}),
        frozenset({"rack0", "rack1"}),
    )
    plain, _ = grid.build_case(case(grid, "m7-t3-p30-EQUAL-HOMOGENEOUS-NONE-UNIFORM-FULL"))
    assert all(sub.rack is None for sub in plain.members.values())
    assert plain.partition_racks == spec.partition_racks  # the cluster has racks either way


def test_case_keys_round_trip_and_reject_unknown_values(grid: ModuleType) -> None:
    key = "m5000-t500-p10000-SKEWED-HETEROGENEOUS_NESTED-PROVIDED-RANGE-PARTITIONS_ADDED"
    assert grid.GridCase.parse(key).key == key
    with pytest.raises(ValueError):
        grid.GridCase.parse("m5-t5-p10-EQUAL-HOMOGENEOUS-NONE-STICKY-FULL")


def test_overrides_replace_a_parameter_in_every_run(grid: ModuleType) -> None:
    argv = ["--members", "10000", "--events", "full,join_one", "--assignors", "UNIFORM", "--runs", "scaling,disjoint"]
    args = grid.parse_args(argv)
    cases = grid.chosen_cases(args)
    assert cases and {c.members for c in cases} == {10000}
    assert {c.event for c in cases} == {"FULL", "JOIN_ONE"} and {c.assignor for c in cases} == {"UNIFORM"}
    assert len(cases) == len(set(cases))


def test_quick_runs_end_to_end_without_java(
    grid: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json, out_md = tmp_path / "grid.json", tmp_path / "grid.md"
    argv = ["--quick", "--no-java", "--events", "FULL,JOIN_ONE,LEAVE_MANY,PARTITIONS_ADDED", "--warmup", "1"]
    argv += ["--repeat", "1", "--json", str(out_json), "--markdown", str(out_md)]
    assert grid.main(argv) == 0
    printed = capsys.readouterr().out
    assert "Java side skipped: --no-java" in printed
    document = json.loads(out_json.read_text())
    keys = {c["key"] for c in document["cases"]}
    assert len(keys) == 2 * 2 * 2 * 4  # subscriptions x racks x assignors x events
    rows = document["rows"]
    assert {r["case"] for r in rows} == keys and {r["side"] for r in rows} == {"regroup"}
    assert all(r["valid"] and r["median_s"] > 0 for r in rows)
    table = out_md.read_text()
    assert table.count("\n| 20 ") == len(keys) and "Java/regroup" in table
    again = tmp_path / "again.md"
    assert grid.main(["--report", str(out_json), "--markdown", str(again)]) == 0
    assert again.read_text() == table
