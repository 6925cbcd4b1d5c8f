"""A heartbeat answered at once (``GroupCoordinator.heartbeat_at_once`` for a classic Heartbeat,
``consumer_group_heartbeat_at_once`` for a KIP-848 ConsumerGroupHeartbeat) is the general path's answer, with the
general path's effect and nothing else.

Random histories of every group API (the driver of ``test_refused_requests``), with classic groups formed as
clients form them, new classic members joining groups that have some, KIP-848 members joining a consumer group
(some by regular expression) and reporting what they own, and many heartbeats of both kinds: most of them a
current member's, at its generation or epoch; some at other ones, of unknown members, naming groups of other
types, with another instance id or client, or (KIP-848) with one field set, to what the member has or to
something new. At each heartbeat the coordinator is copied;
the copy runs the general operation, the original the one at once:

* answered at once: the general path answered the same, for that request only, with no record, event or
  dropped request, and both coordinators are equal afterwards, timers to their scheduling order;
* not answered: the coordinator is exactly as it was (the general path then runs the request, as the
  server would).

A fixed run (derandomized: the same every time) shows the histories do reach both outcomes of both kinds, and
every classic answer the server gives at once.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import (
    ClientInfo,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
)
from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest
from tests.group_views import classic_groups, consumer_groups
from tests.property.test_refused_requests import CLIENT, GROUPS, Driver, state_of

CONSUMER_GROUP, CLASSIC_GROUP = "k", "j"
OTHER_CLIENT = ClientInfo(client_id="another", client_host="/127.0.0.2")
UNKNOWN_CLIENT = ClientInfo(client_id="", client_host="")


def twins_agree(mine: GroupCoordinator, twin: GroupCoordinator) -> None:
    assert state_of(mine) == state_of(twin)
    assert mine.timers._entry == twin.timers._entry  # deadlines and the order among equal ones
    assert mine.next_deadline() == twin.next_deadline()


class TwinDriver(Driver):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.outcomes: dict[str, int] = {"at once": 0, "general": 0, "cg at once": 0, "cg general": 0}
        self.codes: set[ErrorCode] = set()
        self.joined = 0

    def step(self) -> None:
        kind = self.draw(
            st.sampled_from(
                ["heartbeat", "heartbeat", "cg", "cg", "cg-join", "cg-owned", "formed", "newcomer", "other", "other"]
            )
        )
        if kind == "heartbeat":
            self.twin_heartbeat()
        elif kind == "cg":
            self.twin_consumer_heartbeat()
        elif kind == "cg-join":
            self.consumer_join()
        elif kind == "cg-owned":
            self.consumer_owned()
        elif kind == "newcomer":
            self.newcomer()
        elif kind == "formed":
            self.formed()
        else:
            super().step()

    def formed(self) -> None:
        """A classic group of one member formed the way clients form it (JoinGroup twice, the leader's SyncGroup)
        in ``CLASSIC_GROUP`` (kept apart from the other steps' groups), or a new member joining it."""
        self.newcomer(CLASSIC_GROUP)
        self.collect(self.coordinator.advance(self.now))  # (the join phase of a new group ends on a timer)
        group = classic_groups(self.coordinator).get(CLASSIC_GROUP)
        if group is None or group.leader_id is None:
            return
        self.key += 1
        sync = SyncGroupRequest(
            group_id=CLASSIC_GROUP,
            generation_id=group.generation,
            member_id=group.leader_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name=group.protocol_name,
            assignments=tuple((m, b"") for m in sorted(group.members)),
        )
        self.collect(self.coordinator.sync_group(sync, self.key, self.now))

    def newcomer(self, group_id: str | None = None) -> None:
        """A new member joins a classic group (two steps, as clients do): the group rebalances, and its
        members' heartbeats are answered REBALANCE_IN_PROGRESS until they rejoin."""
        if group_id is None:
            groups = classic_groups(self.coordinator)
            if not groups:
                return
            group_id = self.draw(st.sampled_from(sorted(groups)))
        member_id = ""
        for _ in range(2):
            self.key += 1
            req = JoinGroupRequest(
                group_id=group_id,
                member_id=member_id,
                group_instance_id=None,
                session_timeout_ms=10_000,
                rebalance_timeout_ms=5_000,
                protocol_type="consumer",
                protocols=self.protocols() or (("range", b""),),
                version=9,
                client=CLIENT,
            )
            result = self.collect(self.coordinator.join_group(req, self.key, self.now))
            response = result.response_for(self.key)
            if not isinstance(response, JoinGroupResponse) or response.error is not ErrorCode.MEMBER_ID_REQUIRED:
                return
            member_id = response.member_id

    def steady_request(self) -> HeartbeatRequest:
        """A heartbeat of a current classic member most of the time; anything the driver draws otherwise."""
        groups = classic_groups(self.coordinator)
        members = [(g, m) for g in sorted(groups) for m in sorted(groups[g].members)]
        if not members or self.draw(st.integers(0, 4)) == 0:
            member_id = self.member()
            return HeartbeatRequest(
                group_id=self.draw(st.sampled_from([*GROUPS, ""])),
                generation_id=self.epoch_of(member_id),
                member_id=member_id,
                group_instance_id=self.instance(),
            )
        group_id, member_id = self.draw(st.sampled_from(members))
        group = groups[group_id]
        instance = group.members[member_id].group_instance_id
        return HeartbeatRequest(
            group_id=group_id,
            generation_id=self.draw(st.sampled_from([group.generation] * 4 + [group.generation + 1, -1])),
            member_id=member_id,
            group_instance_id=self.draw(st.sampled_from([instance, instance, instance, None, "i1", "i2"])),
        )

    def twin_heartbeat(self) -> None:
        c = self.coordinator
        req = self.steady_request()
        if self.draw(st.booleans()):
            self.collect(c.advance(self.now))  # (else a timer may be due: the answer at once must decline)
        twin = copy.deepcopy(c)
        before = state_of(c)
        entries = dict(c.timers._entry)
        answer = c.heartbeat_at_once(req, self.now)
        if answer is None:
            self.outcomes["general"] += 1
            assert state_of(c) == before, req
            assert c.timers._entry == entries, req
            self.request(c.heartbeat, req)  # what the server does next
            return
        self.outcomes["at once"] += 1
        self.codes.add(answer.error)
        self.key += 1
        result = twin.heartbeat(req, self.key, self.now)
        assert result.refused is None, (req, result.refused)
        assert result.records == [] and result.events == [] and result.dropped == [], req
        assert [(x.key, x.response) for x in result.completions] == [(self.key, answer)], req
        twins_agree(c, twin)

    def consumer_join(self) -> None:
        """A new member joins the consumer group ``CONSUMER_GROUP`` (kept apart from the classic steps' groups)."""
        self.joined += 1
        req = dataclasses.replace(
            self.consumer_request(CONSUMER_GROUP, f"c{self.joined}", 0, CLIENT),
            rebalance_timeout_ms=5_000,
            subscribed_topic_names=self.draw(st.sampled_from([("foo",), ("foo", "bar")])),
            topic_partitions=(),
        )
        if self.draw(st.integers(0, 4)) == 0:  # a regular-expression subscription now and then
            req = dataclasses.replace(req, subscribed_topic_names=None, subscribed_topic_regex="fo.*")
        self.request(self.coordinator.consumer_group_heartbeat, req)

    def consumer_owned(self) -> None:
        """A member of ``CONSUMER_GROUP`` says what it owns now (what it was given): it reconciles."""
        group = consumer_groups(self.coordinator).get(CONSUMER_GROUP)
        if group is None or not group.members:
            return
        member = group.members[self.draw(st.sampled_from(sorted(group.members)))]
        owned = tuple((t, tuple(sorted(ps))) for t, ps in member.assigned.items())
        req = dataclasses.replace(
            self.consumer_request(CONSUMER_GROUP, member.member_id, member.member_epoch, CLIENT), topic_partitions=owned
        )
        self.request(self.coordinator.consumer_group_heartbeat, req)

    def steady_consumer_request(self) -> tuple[ConsumerGroupHeartbeatRequest, ClientInfo]:
        """A ConsumerGroupHeartbeat of a current consumer-group member with nothing new most of the time, each
        field sometimes what the member has, sometimes not; and the client that sends it."""
        groups = consumer_groups(self.coordinator)
        members = [(g, m) for g in sorted(groups) for m in sorted(groups[g].members)]
        client = self.draw(st.sampled_from([CLIENT] * 5 + [OTHER_CLIENT]))
        if not members:
            return self.consumer_request(GROUPS[0], "unknown-member", 1, client), client
        group_id, member_id = self.draw(st.sampled_from(members))
        member = groups[group_id].members[member_id]
        epoch = self.draw(st.sampled_from([member.member_epoch] * 5 + [member.member_epoch + 1, 0, -1]))
        req = self.consumer_request(group_id, member_id, epoch, client)

        variants: dict[str, tuple[Any, Any]] = {  # field: (what the member has, something else)
            "instance_id": (member.instance_id, "i1"),
            "rack_id": (member.rack_id, "rack-b"),
            "rebalance_timeout_ms": (member.rebalance_timeout_ms, 7_000),
            "server_assignor": (member.server_assignor, "range"),
            "subscribed_topic_names": (tuple(reversed(member.subscribed_topic_names)), ("bar",)),
            "topic_partitions": (None, ()),
            "subscribed_topic_regex": (None, "fo.*"),
        }
        for _ in range(self.draw(st.sampled_from([0, 0, 1, 1, 2]))):  # mostly nothing new, or one field set
            name = self.draw(st.sampled_from(sorted(variants)))
            req = dataclasses.replace(req, **{name: variants[name][self.draw(st.integers(0, 1))]})
        return req, client

    def consumer_request(
        self, group_id: str, member_id: str, epoch: int, client: ClientInfo
    ) -> ConsumerGroupHeartbeatRequest:
        return ConsumerGroupHeartbeatRequest(
            group_id=group_id,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=None,
            rack_id=None,
            rebalance_timeout_ms=-1,
            subscribed_topic_names=None,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=None,
            client=client,
        )

    def twin_consumer_heartbeat(self) -> None:
        c = self.coordinator
        req, client = self.steady_consumer_request()
        if self.draw(st.booleans()):
            self.collect(c.advance(self.now))
        twin = copy.deepcopy(c)
        before = state_of(c)
        entries = dict(c.timers._entry)
        # the server hands the core its request with a placeholder client, and the request's client beside it
        answer = c.consumer_group_heartbeat_at_once(dataclasses.replace(req, client=UNKNOWN_CLIENT), client, self.now)
        if answer is None:
            self.outcomes["cg general"] += 1
            assert state_of(c) == before, req
            assert c.timers._entry == entries, req
            self.request(c.consumer_group_heartbeat, req)
            return
        self.outcomes["cg at once"] += 1
        self.key += 1
        result = twin.consumer_group_heartbeat(req, self.key, self.now)
        assert result.refused is None, (req, result.refused)
        assert result.records == [] and result.events == [] and result.dropped == [], req
        assert [(x.key, x.response) for x in result.completions] == [(self.key, answer)], req
        twins_agree(c, twin)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    data=st.data(),
    max_size=st.sampled_from([2, 3, 10]),
    policy=st.sampled_from(["bidirectional", "disabled"]),
    steps=st.integers(10, 60),
)
def test_a_heartbeat_answered_at_once_is_the_general_answer_and_effect(
    data: st.DataObject, max_size: int, policy: str, steps: int
) -> None:
    driver = TwinDriver(data, max_size, 10, policy)
    for _ in range(steps):
        driver.step()
    driver.check_replay()


def test_the_histories_reach_both_outcomes_and_every_answer() -> None:
    seen: dict[str, int] = {"at once": 0, "general": 0, "cg at once": 0, "cg general": 0}
    codes: set[ErrorCode] = set()

    @settings(
        max_examples=60, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        driver = TwinDriver(data, 10, 10, "bidirectional")
        for _ in range(100):
            driver.step()
        for outcome, n in driver.outcomes.items():
            seen[outcome] += n
        codes.update(driver.codes)

    run()
    assert min(seen.values()) >= 20, seen
    assert codes == {ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS}, codes
