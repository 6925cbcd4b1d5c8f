"""The groups' own configurations (``server/group_configs.py``): Kafka's checks as properties — a consumer
setting is accepted exactly when it is an integer within the broker's bounds and the session stays above the
heartbeat interval — and the store: durable, round-tripped, damage reported with the file's name."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.group_config import GroupConfig
from regroup.server.group_configs import (
    GroupConfigStore,
    Ranges,
    core_group_config,
    core_group_configs,
    validate_group_configs,
)
from regroup.storage.format import CorruptLogError
from regroup.storage.topic_config import ConfigError

KAFKA = CoordinatorConfig()  # 45 s session, 5 s heartbeat: Kafka's bounds exactly
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


@given(session=st.integers(-10, 100_000), heartbeat=st.integers(-10, 100_000))
def test_consumer_settings_are_accepted_exactly_within_the_bounds(session: int, heartbeat: int) -> None:
    acceptable = 45_000 <= session <= 60_000 and 5_000 <= heartbeat <= 15_000 and session > heartbeat
    try:
        checked = validate_group_configs({SESSION: f" {session} ", HEARTBEAT: str(heartbeat)}, KAFKA)
    except ConfigError:
        assert not acceptable
    else:
        assert acceptable
        assert checked == {HEARTBEAT: str(heartbeat), SESSION: str(session)}  # trimmed, sorted
        assert core_group_config(checked) == GroupConfig(
            consumer_session_timeout_ms=session, consumer_heartbeat_interval_ms=heartbeat
        )


@given(heartbeat=st.integers(5_000, 15_000))
def test_a_lone_heartbeat_interval_is_checked_against_the_broker_session(heartbeat: int) -> None:
    short = CoordinatorConfig(consumer_group_session_timeout_ms=8_000, consumer_group_heartbeat_interval_ms=1_000)
    assert Ranges.of(short).consumer_session == (8_000, 60_000)  # widened to the broker's own setting
    if heartbeat < 8_000:
        assert validate_group_configs({HEARTBEAT: str(heartbeat)}, short) == {HEARTBEAT: str(heartbeat)}
    else:
        with pytest.raises(ConfigError, match="must be greater than"):
            validate_group_configs({HEARTBEAT: str(heartbeat)}, short)


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"consumer.unknown": "1"}, "Unknown group config name"),
        ({SESSION: "4.5e4"}, "Not a number of type INT"),
        ({SESSION: str(2**31)}, "Not a number of type INT"),
        ({SESSION: "0"}, "at least 1"),
        ({"share.auto.offset.reset": "middle"}, "String must be one of"),
        ({"share.record.lock.duration.ms": "1000"}, "greater than or equal to 15000"),
    ],
)
def test_bad_settings_say_why(configs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_group_configs(configs, KAFKA)


def test_share_reset_is_the_shells_and_share_timeouts_the_coordinators() -> None:
    checked = validate_group_configs({"share.auto.offset.reset": "EARLIEST"}, KAFKA)
    assert checked == {"share.auto.offset.reset": "earliest"}
    assert core_group_config(checked) is None  # the shell resolves the reset when it starts a share partition
    during = validate_group_configs({"share.auto.offset.reset": "by_duration:pt30m"}, KAFKA)
    assert during == {"share.auto.offset.reset": "by_duration:PT30M"}
    with pytest.raises(ConfigError, match="not an ISO 8601 duration"):
        validate_group_configs({"share.auto.offset.reset": "by_duration:soon"}, KAFKA)
    timeouts = validate_group_configs(
        {"share.session.timeout.ms": "50000", "share.record.lock.duration.ms": "20000"}, KAFKA
    )
    assert core_group_config(timeouts) == GroupConfig(
        share_session_timeout_ms=50_000, share_record_lock_duration_ms=20_000
    )


def test_the_broker_bounds_a_groups_record_lock() -> None:
    """``group.share.min/max.record.lock.duration.ms`` bound a group's ``share.record.lock.duration.ms``."""
    lenient = CoordinatorConfig(share_group_min_record_lock_duration_ms=1_000)
    assert validate_group_configs({"share.record.lock.duration.ms": "3000"}, lenient) == {
        "share.record.lock.duration.ms": "3000"
    }
    with pytest.raises(ConfigError, match="greater than or equal to 15000"):
        validate_group_configs({"share.record.lock.duration.ms": "3000"}, KAFKA)
    strict = CoordinatorConfig(share_group_max_record_lock_duration_ms=40_000)
    with pytest.raises(ConfigError, match="less than or equal to 40000"):
        validate_group_configs({"share.record.lock.duration.ms": "50000"}, strict)


ASSIGNMENT = "consumer.assignment.interval.ms"


@given(interval=st.integers(-5, 40_000), low=st.integers(0, 5_000), high=st.integers(5_000, 30_000))
def test_an_assignment_interval_is_accepted_within_the_broker_bounds_zero_included(
    interval: int, low: int, high: int
) -> None:
    """``group.consumer.min/max.assignment.interval.ms`` bound a group's ``consumer.assignment.interval.ms``,
    the one integer setting that may be 0 (no batching)."""
    broker = CoordinatorConfig(
        consumer_group_assignment_interval_ms=low,  # (the broker's own within its bounds, as the flags require)
        consumer_group_min_assignment_interval_ms=low,
        consumer_group_max_assignment_interval_ms=high,
    )
    acceptable = max(low, 0) <= interval <= high
    try:
        checked = validate_group_configs({ASSIGNMENT: str(interval)}, broker)
    except ConfigError as exc:
        assert not acceptable
        assert "at least 0" in str(exc) if interval < 0 else "equal to" in str(exc)
    else:
        assert acceptable
        assert core_group_config(checked) == GroupConfig(consumer_assignment_interval_ms=interval)


def test_the_broker_s_own_interval_widens_the_bounds() -> None:
    broker = CoordinatorConfig(consumer_group_assignment_interval_ms=20_000)
    assert Ranges.of(broker).consumer_assignment == (0, 20_000)
    assert Ranges.of(KAFKA).consumer_assignment == (0, 15_000)
    with pytest.raises(ConfigError, match="less than or equal to 15000"):
        validate_group_configs({ASSIGNMENT: "20000"}, KAFKA)


def test_the_store_round_trips_and_reports_damage(tmp_path: Path) -> None:
    path = tmp_path / "group-configs.json"
    store = GroupConfigStore(path, KAFKA, sync=True)
    store.load()  # no file: no group has settings

    async def alter() -> None:  # (each write waited for before the next, as the handler's lock has them)
        await store.write("a", {SESSION: "50000"})
        await store.write("b", {"share.auto.offset.reset": "earliest"})
        await store.write("c", {HEARTBEAT: "6000"})
        await store.write("c", {})  # removed

    asyncio.run(alter())
    assert list(store.items()) == [("a", {SESSION: "50000"}), ("b", {"share.auto.offset.reset": "earliest"})]
    again = GroupConfigStore(path, KAFKA, sync=True)
    again.load()
    assert list(again.items()) == [("a", {SESSION: "50000"}), ("b", {"share.auto.offset.reset": "earliest"})]
    assert core_group_configs(again) == {"a": GroupConfig(consumer_session_timeout_ms=50_000)}
    for damage in ("{not json", '["a"]', '{"a": {"consumer.session.timeout.ms": "1"}}'):
        path.write_text(damage, encoding="utf-8")
        with pytest.raises(CorruptLogError, match=r"group-configs\.json"):
            GroupConfigStore(path, KAFKA, sync=True).load()


def test_a_share_group_s_assignment_interval_is_bounded_the_same_way() -> None:
    name = "share.assignment.interval.ms"
    assert core_group_config(validate_group_configs({name: "0"}, KAFKA)) == GroupConfig(share_assignment_interval_ms=0)
    assert core_group_config(validate_group_configs({name: " 2500 "}, KAFKA)) == GroupConfig(
        share_assignment_interval_ms=2_500
    )
    for bad, why in (("-1", "at least 0"), ("15001", "less than or equal to 15000"), ("1.5", "Not a number")):
        with pytest.raises(ConfigError, match=why):
            validate_group_configs({name: bad}, KAFKA)
    lenient = CoordinatorConfig(share_group_max_assignment_interval_ms=30_000)
    assert validate_group_configs({name: "20000"}, lenient) == {name: "20000"}
