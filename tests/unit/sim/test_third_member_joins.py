"""The bundled third-member-joins scenarios (eager and cooperative rebalancing, KIP-429): topic-foo p0..p2,
c0 owns [p0,p1] and c1 owns [p2], then c2 joins. Eager members revoke everything before rejoining; cooperative
members revoke only what moves, in a follow-up rebalance. The earlier names still load."""

from __future__ import annotations

import pytest

from regroup.sim import load, simulate, summarize
from regroup.sim.engine import Simulator
from regroup.sim.summary import Summary


def run(name: str, seed: int = 0) -> tuple[Simulator, Summary]:
    scenario = load(name)
    sim = simulate(scenario, seed)
    return sim, summarize(sim.log.events, scenario.measure_from_ms)


def owners_before_c2(sim: Simulator) -> dict[str, list[int]]:
    """The assignment of the last generation that became Stable before c2 joins (t = 30 s)."""
    rows = [e for e in sim.log.events if e["type"] == "group_assignment" and e["t"] < 30_000]
    last = max(e["generation"] for e in rows)
    out: dict[str, list[int]] = {}
    for e in rows:
        if e["generation"] == last:
            out.setdefault(e["member"], []).append(e["partition"])
    return out


@pytest.mark.parametrize("name", ["third-member-joins-eager", "third-member-joins-cooperative"])
def test_the_group_starts_as_in_the_story(name: str) -> None:
    sim, _ = run(name)
    assert owners_before_c2(sim) == {"c0": [0, 1], "c1": [2]}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_eager_stops_all_three_partitions_in_one_rebalance(seed: int) -> None:
    sim, summary = run("third-member-joins-eager", seed)
    assert summary.violations == []
    assert len(summary.rebalances) == 1
    (rebalance,) = summary.rebalances
    assert rebalance.rounds == 1 and rebalance.revoked == 3
    assert rebalance.unowned_partitions == ["topic-foo-0", "topic-foo-1", "topic-foo-2"]
    assert rebalance.unowned_partition_ms >= 3 * 10  # at least a round trip each
    assert summary.final_assignment == {"c0": {"topic-foo": [0]}, "c1": {"topic-foo": [1]}, "c2": {"topic-foo": [2]}}
    revoked_by = {e["member"] for e in sim.log.events if e["type"] == "revoked" and e["t"] >= 30_000}
    assert revoked_by == {"c0", "c1"}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cooperative_moves_only_p1_and_takes_two_rebalances(seed: int) -> None:
    sim, summary = run("third-member-joins-cooperative", seed)
    assert summary.violations == []
    assert len(summary.rebalances) == 2
    first, second = summary.rebalances
    assert second.generation == first.generation + 1
    assert (first.moved, second.moved) == (0, 1)
    assert (first.revoked, second.revoked) == (1, 0)
    assert set(first.unowned_partitions + second.unowned_partitions) == {"topic-foo-1"}
    assert summary.final_assignment == {"c0": {"topic-foo": [0]}, "c1": {"topic-foo": [2]}, "c2": {"topic-foo": [1]}}
    after = [e for e in sim.log.events if e["t"] >= 30_000]
    assert [(e["member"], e["partition"]) for e in after if e["type"] in ("revoked", "lost")] == [("c0", 1)]
    assert [(e["member"], e["partition"]) for e in after if e["type"] == "assigned"] == [("c2", 1)]
    c1_losses = [e for e in sim.log.events if e["member"] == "c1" and e["type"] in ("revoked", "lost", "stopped")]
    assert c1_losses == []  # c1 never gives up p2


@pytest.mark.parametrize("kind", ["eager", "cooperative", "consumer"])
def test_the_earlier_names_load_the_same_scenarios(kind: str) -> None:
    assert load(f"seed-004-{kind}") == load(f"third-member-joins-{kind}")


def test_eager_and_cooperative_differ_in_what_stops() -> None:
    _, eager = run("third-member-joins-eager")
    _, cooperative = run("third-member-joins-cooperative")
    assert sum(len(r.unowned_partitions) for r in eager.rebalances) == 3
    assert {p for r in cooperative.rebalances for p in r.unowned_partitions} == {"topic-foo-1"}
    assert sum(r.moved for r in cooperative.rebalances) == 1
