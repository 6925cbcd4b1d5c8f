"""K22: a group's own settings (KIP-848's dynamic group configuration) override the broker's consumer-group
session timeout and heartbeat interval for that group only, from each member's next heartbeat, and survive a
reload of the coordinator (docs/protocol.md)."""

from __future__ import annotations

import pytest

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.group_config import GroupConfig
from regroup.coordinator.ids import CountingIds
from tests.coordinator.consumer_harness import ConsumerHarness
from tests.group_views import consumer_groups

SESSION_MS, HEARTBEAT_MS = 45_000, 5_000  # the broker's (the harness's defaults)


@pytest.fixture
def h() -> ConsumerHarness:
    harness = ConsumerHarness()
    harness.topics(foo=6)
    return harness


def test_k22_the_group_interval_is_what_its_members_are_told(h: ConsumerHarness) -> None:
    """Given group g with consumer.heartbeat.interval.ms 7000;
    when a member joins g and another joins group other;
    then g's member is told 7000 ms and the other member the broker's 5000 ms; nothing is written for the
    setting itself."""
    h.coordinator.set_group_config("g", GroupConfig(consumer_heartbeat_interval_ms=7_000))
    assert h.join_cg(group_id="g").heartbeat_interval_ms == 7_000
    assert h.join_cg(group_id="other").heartbeat_interval_ms == HEARTBEAT_MS


def test_k22_the_group_session_timeout_fences_its_members(h: ConsumerHarness) -> None:
    """Given group g with consumer.session.timeout.ms 50000 and a member that joined it;
    when the member sends no heartbeat;
    then it is still there after the broker's 45 s and fenced at 50 s, not before."""
    h.coordinator.set_group_config("g", GroupConfig(consumer_session_timeout_ms=50_000))
    member = h.join_cg(group_id="g").member_id
    h.sleep(SESSION_MS)
    assert member in h.cg("g").members
    h.sleep(50_000 - SESSION_MS - 1)
    assert member in h.cg("g").members
    h.sleep(1)
    assert member not in h.cg("g").members


def test_k22_a_change_applies_from_the_next_heartbeat(h: ConsumerHarness) -> None:
    """Given a member that joined with the broker's settings;
    when its group gets a 50 s session and a 6 s interval;
    then its running session still ends 45 s after its last heartbeat, while after its next heartbeat it
    is told 6000 ms and its session lasts 50 s; when the setting is removed, the next heartbeat brings back
    the broker's."""
    member = h.join_cg(group_id="g").member_id
    h.coordinator.set_group_config(
        "g", GroupConfig(consumer_session_timeout_ms=50_000, consumer_heartbeat_interval_ms=6_000)
    )
    h.sleep(10_000)
    epoch = h.cmember(member, "g").member_epoch
    assert h.hb(member, epoch, group_id="g").heartbeat_interval_ms == 6_000
    h.sleep(49_999)
    assert member in h.cg("g").members
    h.coordinator.set_group_config("g", None)
    assert h.hb(member, epoch, group_id="g").heartbeat_interval_ms == HEARTBEAT_MS
    h.sleep(SESSION_MS)
    assert member not in h.cg("g").members

    other = h.join_cg(group_id="h").member_id  # a running session keeps the timeout it was started with
    h.coordinator.set_group_config("h", GroupConfig(consumer_session_timeout_ms=60_000))
    h.sleep(SESSION_MS)
    assert other not in h.cg("h").members


def test_k22_an_empty_setting_is_the_broker_setting(h: ConsumerHarness) -> None:
    h.coordinator.set_group_config("g", GroupConfig(consumer_heartbeat_interval_ms=7_000))
    h.coordinator.set_group_config("g", GroupConfig())
    assert h.coordinator.group_configs == {}
    assert h.join_cg(group_id="g").heartbeat_interval_ms == HEARTBEAT_MS


def test_k22_a_reloaded_coordinator_restarts_sessions_with_the_group_timeout(h: ConsumerHarness) -> None:
    """Given a member of group g with a 50 s session;
    when a new coordinator is rebuilt from the records with the groups' settings;
    then the member's restarted session lasts 50 s from the reload (and 45 s without the setting)."""
    h.coordinator.set_group_config("g", GroupConfig(consumer_session_timeout_ms=50_000))
    member = h.join_cg(group_id="g").member_id
    for group_configs, lasts in ((dict(h.coordinator.group_configs), 50_000), (None, SESSION_MS)):
        coordinator = GroupCoordinator.from_records(
            h.records, h.now_ms, h.config, CountingIds(1_000_000), group_configs
        )
        coordinator.advance(h.now_ms + lasts - 1)
        assert member in consumer_groups(coordinator)["g"].members
        coordinator.advance(h.now_ms + lasts)
        assert member not in consumer_groups(coordinator)["g"].members
