"""The in-memory network: FIFO links, seeded jitter, loss, duplication and isolation."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.sim.network import TO_COORDINATOR, TO_MEMBER, Network, uniform_jitter
from regroup.sim.scenario import LinkSpec


def test_fault_free_link_delivers_after_the_latency_and_draws_nothing() -> None:
    rng = random.Random(1)
    state = rng.getstate()
    net = Network(LinkSpec(latency_ms=7), rng)
    assert net.transmit("a", TO_COORDINATOR, 100).deliveries == (107,)
    assert rng.getstate() == state


def test_jitter_never_reorders_a_link() -> None:
    net = Network(LinkSpec(latency_ms=1, jitter_ms=500), random.Random(3))
    times = [net.transmit("a", TO_MEMBER, t).deliveries[0] for t in range(0, 200, 2)]
    assert times == sorted(times)
    assert len(set(times)) > 10


def test_loss_duplication_and_isolation() -> None:
    net = Network(LinkSpec(loss=1.0), random.Random(0))
    assert net.transmit("a", TO_COORDINATOR, 0).dropped == "lost"
    net.change(None, {"loss": 0.0, "duplicate": 1.0})
    assert len(net.transmit("a", TO_COORDINATOR, 0).deliveries) == 2
    net.isolate("a")
    assert net.transmit("a", TO_COORDINATOR, 0).dropped == "isolated" and not net.reachable("a")
    assert net.transmit("b", TO_COORDINATOR, 0).deliveries
    net.heal("a")
    assert net.reachable("a")


def test_per_member_link_changes() -> None:
    net = Network(LinkSpec(latency_ms=5), random.Random(0))
    net.change("slow", {"latency_ms": 300})
    assert net.transmit("slow", TO_COORDINATOR, 0).deliveries == (300,)
    assert net.transmit("fast", TO_COORDINATOR, 0).deliveries == (5,)
    net.change(None, {"latency_ms": 1})
    assert net.transmit("slow", TO_COORDINATOR, 1000).deliveries == (1001,)


def test_same_seed_same_fate() -> None:
    def fates(seed: int) -> list[tuple[int, ...]]:
        net = Network(LinkSpec(latency_ms=3, jitter_ms=30, loss=0.3, duplicate=0.2), random.Random(seed))
        return [net.transmit("a", TO_COORDINATOR, t * 10).deliveries for t in range(50)]

    assert fates(4) == fates(4)
    assert fates(4) != fates(5)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), jitters=st.lists(st.integers(1, 10_000), min_size=1, max_size=50))
def test_uniform_jitter_draws_what_randint_draws(seed: int, jitters: list[int]) -> None:
    # the same values and the same generator state after each draw, so every later draw agrees too
    ours, reference = random.Random(seed), random.Random(seed)
    for jitter in jitters:
        assert uniform_jitter(ours, jitter) == reference.randint(0, jitter)
        assert ours.getstate() == reference.getstate()
