"""The application model's arithmetic: the poll loop's poll times (computed, never one event per batch), its
stop after the batch in hand, batch durations of each distribution, and the callback waits of the
application thread."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.client.app import INSTANT_APP, AppModel, AppThread, PollLoop


def fixed(records: int, ms: float) -> AppModel:
    return AppModel(max_poll_records=records, processing=("fixed", ms))


def test_an_idle_loop_polls_at_once() -> None:
    loop = PollLoop(fixed(500, 1.0), None)
    assert not loop.running
    assert loop.next_poll(1234) == 1234


@given(start=st.integers(0, 10**6), records=st.integers(1, 1000), ms=st.floats(0.01, 20.0), ask=st.integers(0, 10**6))
@settings(max_examples=200, deadline=None)
def test_fixed_batches_poll_on_the_grid_of_their_duration(start: int, records: int, ms: float, ask: int) -> None:
    loop = PollLoop(fixed(records, ms), None)
    loop.start(start)
    at = start + ask
    poll = loop.next_poll(at)
    step = records * ms
    k = round((poll - start) / step)
    assert poll >= at
    assert abs(poll - (start + k * step)) <= 1  # on the grid, rounded to whole milliseconds
    assert poll - at <= step + 1  # the first poll at or after ``at``


def test_zero_processing_never_runs_batches() -> None:
    loop = PollLoop(INSTANT_APP, None)
    loop.start(100)
    assert not loop.running and loop.next_poll(150) == 150


def test_stop_finishes_the_batch_in_hand_then_idles() -> None:
    loop = PollLoop(fixed(100, 10.0), None)  # 1 s batches
    loop.start(0)
    loop.stop(2_500)  # the batch of [2000, 3000) is finished first
    assert loop.next_poll(2_600) == 3_000
    assert loop.next_poll(3_000) == 3_000
    assert not loop.running
    assert loop.next_poll(7_777) == 7_777


def test_drawn_batches_are_reproducible_and_increasing() -> None:
    app = AppModel(max_poll_records=50, processing=("exponential", 2.0))
    polls = []
    for _ in range(2):
        loop = PollLoop(app, random.Random("s"))
        loop.start(0)
        seen = [loop.next_poll(t) for t in range(0, 20_000, 37)]
        polls.append(seen)
        assert seen == sorted(seen)
        assert all(p >= t for p, t in zip(seen, range(0, 20_000, 37), strict=True))
    assert polls[0] == polls[1]


def test_a_batch_longer_than_the_poll_interval_is_found() -> None:
    loop = PollLoop(fixed(10, 4_000.0), None)  # 40 s batches
    loop.start(1_000)
    assert loop.can_outlast(30_000)
    loop.advance(31_000, 30_000)
    assert loop.overrun_at == 31_000  # the poll at 1 s + max.poll.interval.ms
    short = PollLoop(fixed(10, 1.0), None)
    assert not short.can_outlast(30_000)


@pytest.mark.parametrize(
    "processing",
    [("fixed", 2.0), ("uniform", 1.0, 3.0), ("exponential", 2.0), ("lognormal", 2.0 / 1.1331484530668263, 0.5)],
)
@pytest.mark.parametrize("records", [5, 500])
def test_batch_times_have_the_distributions_mean(processing: tuple[object, ...], records: int) -> None:
    app = AppModel(max_poll_records=records, processing=processing)
    draws = random.Random(7)
    samples = [app.batch_ms(draws) for _ in range(2_000)]
    mean = sum(samples) / len(samples)
    assert app.mean_ms() == pytest.approx(2.0, rel=1e-6)
    assert mean == pytest.approx(2.0 * records, rel=0.05)
    assert min(samples) >= 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_poll_records": 0}, "max_poll_records"),
        ({"processing": ("uniform", 3.0, 1.0)}, "min must not exceed max"),
        ({"processing": ("exponential", 0.0)}, "mean must be > 0"),
        ({"processing": ("gamma", 1.0)}, "distribution"),
        ({"client": "go"}, "client"),
        ({"heartbeat_phase": "random"}, "heartbeat_phase"),
        ({"revoke_ms": -1}, "callback times"),
    ],
)
def test_impossible_settings_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AppModel(**fields)  # type: ignore[arg-type]


def test_a_callback_waits_for_its_commit_then_its_user_work() -> None:
    thread = AppThread(AppModel(revoke_ms=30), None)
    assert thread.at_poll(0)
    assert thread.callback(7, 0, 30)
    assert not thread.at_poll(100) and thread.next_ready(100) is None  # waiting for the commit's answer
    assert not thread.answered(8, 100)
    assert thread.answered(7, 120)
    assert not thread.free(149) and thread.free(150)
    assert thread.next_ready(130) == 150
    assert not thread.callback(None, 150, 0)  # nothing to wait for


def test_heartbeat_lateness_follows_the_client() -> None:
    draws = random.Random(1)
    java = [AppThread(AppModel(), draws).late_ms() for _ in range(500)]
    librdkafka = [AppThread(AppModel(client="librdkafka"), draws).late_ms() for _ in range(500)]
    aligned = [AppThread(AppModel(heartbeat_phase="aligned"), draws).late_ms() for _ in range(50)]
    assert min(java) >= 0 and max(java) < 100 and max(java) > 50
    assert min(librdkafka) >= 0 and max(librdkafka) < 4 and max(librdkafka) >= 2
    assert set(aligned) == {0}
