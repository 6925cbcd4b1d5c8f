"""The simulator: a virtual clock and an event queue driving a real ``GroupCoordinator`` and one sans-IO
member per scenario member (a ``ClassicClientMember``, a KIP-848 ``ConsumerClientMember``, or a KIP-932
``ShareClientMember``) over the in-memory ``Network``.

Everything is deterministic for a given scenario and seed: time is virtual, the only randomness is the
seeded ``random.Random`` behind the network, member ids come from a counter, and ties in the queue are
broken by insertion order. The run produces an ``EventLog`` (see docs/simulator.md), the safety checker's
violations, and (``summary``) a per-rebalance summary computed from the log alone.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

from mypy_extensions import mypyc_attr

from regroup.client import (
    ClassicClientMember,
    ClassicClientState,
    ConsumerClientMember,
    ConsumerConfig,
    MemberConfig,
    OutgoingRequest,
    ShareClientMember,
    ShareClientState,
    ShareConsumerConfig,
)
from regroup.client.consumer_member import ConsumerClientState
from regroup.client.types import TopicPartition
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import MemberAssignmentChanged, Partitions
from regroup.coordinator.ids import CountingIds
from regroup.model.cluster import topic_id_for
from regroup.sim.checks import SafetyChecker
from regroup.sim.describe import request_detail, request_ids, response_fields
from regroup.sim.endpoint import CoordinatorEndpoint
from regroup.sim.eventlog import EventLog
from regroup.sim.network import TO_COORDINATOR, TO_MEMBER, Network
from regroup.sim.observed import ObservedGroup
from regroup.sim.queue import CoordinatorWake, Disconnect, EventQueue, Item, ToCoordinator, ToMember, Wake
from regroup.sim.scenario import MemberSpec, Scenario, ScenarioEvent
from regroup.sim.share_endpoint import ShareEndpoint

#: A run never needs this many events at one virtual instant; more means a machine keeps asking to be
#: woken at a time it does not act on (a bug), and the simulator stops instead of spinning.
MAX_STEPS_AT_ONE_TIME: Final = 100_000


@mypyc_attr(native_class=False)  # (a builtin exception base: kept a Python class when compiled)
class SimulationStuck(RuntimeError):
    """The simulation stopped making progress in virtual time."""


NOTE_TYPES: Final = {
    "timeout": "request_timeout",
    "reset": "member_reset",
    "rejoin": "rejoin_requested",
    "fatal": "member_failed",
    "retry": "request_retry",
    "commit_failed": "commit_failed",
}

Machine = ClassicClientMember | ConsumerClientMember | ShareClientMember

_LEFT: Final = ClassicClientState.LEFT
_CRASHED: Final = ClassicClientState.CRASHED
_FAILED: Final = ClassicClientState.FAILED
_CONSUMER_LEFT: Final = ConsumerClientState.LEFT
_CONSUMER_CRASHED: Final = ConsumerClientState.CRASHED
_CONSUMER_FAILED: Final = ConsumerClientState.FAILED
_SHARE_LEFT: Final = ShareClientState.LEFT
_SHARE_CRASHED: Final = ShareClientState.CRASHED
_SHARE_FAILED: Final = ShareClientState.FAILED


def stopped(state: object) -> bool:
    """``not state.running`` for a state of any protocol's member, by identity alone (no property call,
    and no equality calls as ``in`` a tuple makes for every state it does not hold)."""
    return (
        state is _LEFT
        or state is _CRASHED
        or state is _FAILED
        or state is _CONSUMER_LEFT
        or state is _CONSUMER_CRASHED
        or state is _CONSUMER_FAILED
        or state is _SHARE_LEFT
        or state is _SHARE_CRASHED
        or state is _SHARE_FAILED
    )


@dataclass
class Slot:
    """A scenario member and its current process (a new ``ClassicClientMember`` per start)."""

    spec: MemberSpec
    machine: Machine | None = None
    protocol: str = "classic"  # the protocol of the next process (a start action may switch it)
    incarnation: int = 0
    wake_at: int | None = None
    seen_callbacks: int = 0
    seen_notes: int = 0
    last_view: tuple[object, str, int] = (None, "", -1)  # (state, member id, generation) last logged
    #: a bounce waiting for the old process to close: the protocol of the next process ("" = unchanged)
    start_when_closed: str | None = None
    #: a share member (in the share group, outside the consumer group's checks and quiescence)
    share: bool = False
    #: a share member: the partitions of its assignment last logged
    share_assigned: frozenset[TopicPartition] = frozenset()


@mypyc_attr(allow_interpreted_subclasses=True)  # tests and benchmarks subclass it, also when compiled
class Simulator:
    """One run of a scenario. ``run()`` processes queued events in virtual-time order up to the scenario's
    duration (``step()`` one at a time); ``log``, ``checker.violations`` and ``quiescent()`` describe it."""

    def __init__(self, scenario: Scenario, seed: int = 0) -> None:
        self.scenario = scenario
        self.seed = seed
        self.group_id = scenario.group_id
        self.log = EventLog()
        self.checker = SafetyChecker(self.log)
        self.coordinator = GroupCoordinator(scenario.coordinator_config(), CountingIds())
        self.network = Network(scenario.network, random.Random(seed))
        self.topics = dict(scenario.topics)
        self.slots = {m.name: Slot(m, protocol=m.protocol, share=m.protocol == "share") for m in scenario.members}
        self._share_names = frozenset(m.name for m in scenario.members if m.protocol == "share")
        self.names_by_id: dict[str, str] = {}
        self.endpoint = CoordinatorEndpoint(self.coordinator, self.group_id, self.log, self.checker, self.names_by_id)
        if self._share_names:
            self.endpoint.share = ShareEndpoint(self.endpoint, scenario.share, scenario.share_group_id, self.topics)
        self.now = 0
        self._queue = EventQueue()
        self._coordinator_wake: int | None = None
        self._same_time_steps = 0
        # caches for the per-step quiescence check, invalidated by ``_topics_version``
        self._topics_version = 0
        self._slot_list = list(self.slots.values())
        self._expected: tuple[int, int, frozenset[TopicPartition]] | None = None  # (live and topics versions, ...)
        # the classic group as the last quiescence check saw it (the observed group's version: it counts changes
        # of the group, its generation and its members), the members polled since, and, as of that check, the
        # running members and those of them not (yet) settled in the group's generation
        self._classic_view: int | None = None
        self._polled: set[str] = set()
        self._live: set[str] = set()
        self._live_version = 0  # counts changes to ``_live``
        self._unsettled: set[str] = set()
        # consumer group: per running member, the current assignment it was last examined against and the answer
        self._held: dict[str, tuple[MemberAssignmentChanged, int, bool]] = {}
        self._assigned_cache: dict[int, tuple[object, int, frozenset[TopicPartition]]] = {}
        self.log.emit(0, "sim_start", detail=scenario.name, value=seed)
        for topic, count in sorted(self.topics.items()):
            self.log.emit(0, "topic", topic=topic, value=count)
        self._respond(self.endpoint.set_topics(self.topics, 0))
        for event in scenario.events:
            self._queue.push(event.at_ms, event)

    # --------------------------------------------------------------------------------------- running
    def run(self, until_ms: int | None = None) -> None:
        """Process every event up to ``until_ms`` (default: the scenario's duration)."""
        end = self.scenario.duration_ms if until_ms is None else until_ms
        while self.step(end):
            pass
        self.now = max(self.now, end)

    def step(self, until_ms: int | None = None) -> bool:
        """Process the next queued event if it is due by ``until_ms``; False when there is none."""
        end = self.scenario.duration_ms if until_ms is None else until_ms
        next_at = self._queue.next_at()
        if next_at is None or next_at > end:
            return False
        at_ms, item = self._queue.pop()
        if at_ms == self.now:
            self._same_time_steps += 1
            if self._same_time_steps > MAX_STEPS_AT_ONE_TIME:
                raise SimulationStuck(f"more than {MAX_STEPS_AT_ONE_TIME} events at {at_ms} ms: a wake-up loop")
        else:
            self._same_time_steps = 0
        self.now = at_ms
        if isinstance(item, Wake) and self.slots[item.member].wake_at != at_ms:
            return True  # superseded by an earlier wake-up: nothing is due for the member, nothing changes
        self._handle(item)
        self.checker.quiescent(self.now, self.expected_if_quiescent())
        return True

    def finish(self) -> None:
        share = self.endpoint.share
        if share is not None:
            topics = {t for name in sorted(self._share_names) for t in self.slots[name].spec.topics}
            share.finish(self.now, {t: self.topics[t] for t in sorted(topics)})
        self.log.emit(self.now, "sim_end", value=len(self.checker.violations))

    def schedule(self, event: ScenarioEvent) -> None:
        """Queue one more scenario action (at ``event.at_ms``, not before now); for scripted tests."""
        if event.at_ms < self.now:
            raise ValueError(f"cannot schedule an action at {event.at_ms} ms, before now ({self.now} ms)")
        self._queue.push(event.at_ms, event)

    def _handle(self, item: Item) -> None:
        if isinstance(item, ScenarioEvent):
            self._action(item)
        elif isinstance(item, Wake):
            self.slots[item.member].wake_at = None
            self._poll(item.member)
        elif isinstance(item, CoordinatorWake):
            if self._coordinator_wake == self.now:
                self._coordinator_wake = None
            self._respond(self.endpoint.advance(self.now))
        elif isinstance(item, ToCoordinator):
            self._deliver_request(item)
        elif isinstance(item, Disconnect):
            self._respond(self.endpoint.disconnect(item.member_id, self.now))
        else:
            self._deliver_response(item)

    # ---------------------------------------------------------------------------------------- actions
    def _action(self, event: ScenarioEvent) -> None:
        name = event.member
        detail = event.action
        if event.action == "partitions":
            detail = f"partitions {event.topic}={event.count}"
        elif event.action == "network":
            detail = "network " + " ".join(f"{k}={v:g}" for k, v in sorted(event.link.items()))
        self.log.emit(self.now, "action", member=name, detail=detail)
        slot = self.slots[name] if name is not None else None
        running = slot is not None and slot.machine is not None and slot.machine.state.running
        if event.action == "bounce" and slot is not None and running and slot.machine is not None:
            # a rolling restart: close cleanly; the new process starts once the old one has closed (its
            # leave sent, after the closing commit and callback), as a deployment replaces a process
            slot.machine.leave(self.now)
            self._poll(slot.spec.name)
            if slot.machine.closing:
                slot.start_when_closed = event.protocol or ""
                return
            running = False
        if event.action in ("join", "restart", "bounce"):
            if slot is None or running:
                self.log.emit(self.now, "action_ignored", member=name, detail=f"{event.action}: already running")
                return
            if event.protocol is not None:
                slot.protocol = event.protocol
            self._start(slot)
        elif event.action in ("leave", "crash"):
            if slot is None or not running or slot.machine is None:
                self.log.emit(self.now, "action_ignored", member=name, detail=f"{event.action}: not running")
                return
            if event.action == "leave":
                slot.machine.leave(self.now)
            elif isinstance(slot.machine, ShareClientMember):
                slot.machine.crash()
                if self.scenario.share.crash_disconnects:
                    self._disconnect(slot.spec.name, slot.machine.member_id)
            else:
                self.log.emit_partitions(
                    self.now,
                    "stopped",
                    sorted(slot.machine.owned),
                    member=name or "",
                    generation=slot.machine.generation,
                    detail="process crashed",
                )
                slot.machine.crash()
            self._poll(slot.spec.name)
        elif event.action == "isolate" and name is not None:
            self.network.isolate(name)
        elif event.action == "heal" and name is not None:
            self.network.heal(name)
        elif event.action == "network":
            self.network.change(name, event.link)
        elif event.action == "partitions" and event.topic is not None and event.count is not None:
            self.topics[event.topic] = event.count
            self._topics_version += 1
            self.log.emit(self.now, "topic", topic=event.topic, value=event.count)
            self._respond(self.endpoint.set_topics(self.topics, self.now))
            for member, other in self.slots.items():
                if isinstance(other.machine, ClassicClientMember) and other.machine.state.running:
                    other.machine.update_metadata(self.topics, self.now)
                    self._poll(member)

    def _start(self, slot: Slot) -> None:
        spec = slot.spec
        slot.start_when_closed = None
        slot.share_assigned = frozenset()
        machine: Machine
        if slot.protocol == "share":
            machine = self._share_member(slot)
            protocol = "share"
        elif slot.protocol == "consumer":
            coordinator = self.coordinator.config
            draws = self._draws(slot)
            member_id = f"{spec.name}-{slot.incarnation + 1}"  # chosen by the client (KIP-1082)
            if draws is not None:  # as real clients do, at random (the server assignors order members by id)
                member_id = f"{draws.getrandbits(64):016x}-{member_id}"
            machine = ConsumerClientMember(
                ConsumerConfig(
                    group_id=self.group_id,
                    client_id=spec.name,
                    topics=spec.topics,
                    member_id=member_id,
                    group_instance_id=spec.group_instance_id,
                    rack=spec.rack,
                    server_assignor=spec.assignor,
                    session_timeout_ms=coordinator.consumer_group_session_timeout_ms,
                    heartbeat_interval_ms=coordinator.consumer_group_heartbeat_interval_ms,
                    rebalance_timeout_ms=spec.rebalance_timeout_ms,
                    request_timeout_ms=spec.request_timeout_ms,
                    auto_commit=spec.auto_commit,
                    auto_commit_interval_ms=spec.auto_commit_interval_ms,
                    callback_delay_ms=spec.callback_delay_ms,
                ),
                {topic: topic_id_for(topic) for topic in sorted(self.topics)},
                self.now,
                spec.app,
                draws,
            )
            protocol = "consumer"
            self.names_by_id[machine.member_id] = spec.name
        else:
            config = MemberConfig(
                group_id=self.group_id,
                client_id=spec.name,
                topics=spec.topics,
                strategies=spec.strategies,
                group_instance_id=spec.group_instance_id,
                rack=spec.rack,
                session_timeout_ms=spec.session_timeout_ms,
                heartbeat_interval_ms=spec.heartbeat_interval_ms,
                rebalance_timeout_ms=spec.rebalance_timeout_ms,
                request_timeout_ms=spec.request_timeout_ms,
                auto_commit=spec.auto_commit,
                auto_commit_interval_ms=spec.auto_commit_interval_ms,
            )
            classic = ClassicClientMember(config, self.topics, self.now, spec.app, self._draws(slot))
            protocol = "cooperative" if classic.cooperative else "eager"
            machine = classic
        slot.machine = machine
        self.log.emit(
            self.now,
            "subscription",
            member=spec.name,
            state=protocol,
            detail=",".join(spec.topics),
            value=slot.incarnation + 1,
        )
        slot.incarnation += 1
        slot.seen_callbacks = slot.seen_notes = 0
        slot.last_view = (None, "", -1)
        slot.wake_at = None
        self._poll(spec.name)

    def _share_member(self, slot: Slot) -> ShareClientMember:
        """A new share consumer process; its member id is its own (Kafka's client draws one at random)."""
        spec = slot.spec
        draws = self._draws(slot)
        member_id = f"{spec.name}-{slot.incarnation + 1}"
        if draws is not None:
            member_id = f"{draws.getrandbits(64):016x}-{member_id}"[:36]
        config = ShareConsumerConfig(
            group_id=self.scenario.share_group_id,
            client_id=spec.name,
            topics=spec.topics,
            member_id=member_id,
            rack=spec.rack,
            heartbeat_interval_ms=self.coordinator.config.share_group_heartbeat_interval_ms,
            request_timeout_ms=spec.request_timeout_ms,
            fetch_max_wait_ms=spec.fetch_max_wait_ms,
            release_fraction=spec.release_fraction,
            reject_fraction=spec.reject_fraction,
        )
        self.names_by_id[member_id] = spec.name
        topic_ids = {topic: topic_id_for(topic) for topic in sorted(self.topics)}
        return ShareClientMember(config, topic_ids, self.now, spec.app, draws)

    def _disconnect(self, name: str, member_id: str) -> None:
        """The crashed process's connection closes: the coordinator's side learns it one link latency later,
        unless the link is cut (or loses the message): then what the process held waits for its locks."""
        sent = self.network.transmit(name, TO_COORDINATOR, self.now)
        if sent.dropped is not None:
            self.log.emit(
                self.now,
                "message_dropped",
                member=name,
                state=TO_COORDINATOR,
                detail=f"{sent.dropped}: connection close",
            )
            return
        self._queue.push(sent.deliveries[0], Disconnect(name, member_id))

    def _draws(self, slot: Slot) -> random.Random | None:
        """The random source of the process about to start: its own, seeded by the run's seed, the member and
        the incarnation (so one process's draws never shift another's); None when its application draws
        nothing."""
        if not slot.spec.draws_needed:
            return None
        return random.Random(f"{self.seed}/{slot.spec.name}/{slot.incarnation + 1}")

    # ------------------------------------------------------------------------------------ the members
    def _poll(self, name: str) -> None:
        slot = self.slots[name]
        if not slot.share:
            self._polled.add(name)
            self._held.pop(name, None)
        machine = slot.machine
        if machine is None:
            return
        outgoing = machine.poll(self.now)
        self._observe_member(name, slot, machine)  # callbacks and notes first: they explain the requests
        for out in outgoing:
            self._send_request(name, slot, out)
        if slot.start_when_closed is not None and not machine.closing:
            protocol, slot.start_when_closed = slot.start_when_closed, None
            if protocol:
                slot.protocol = protocol
            self._start(slot)
            return
        deadline = machine.next_deadline()
        if deadline is not None and (slot.wake_at is None or deadline < slot.wake_at or slot.wake_at < self.now):
            slot.wake_at = max(deadline, self.now)
            self._queue.push(slot.wake_at, Wake(name))

    def _send_request(self, name: str, slot: Slot, out: OutgoingRequest) -> None:
        req = out.request
        member_id, generation = request_ids(req)
        self.log.emit(
            self.now,
            "request_sent",
            member=name,
            member_id=member_id,
            generation=generation,
            api=out.api,
            request_id=out.request_id,
            detail=request_detail(req, self.endpoint.topic_names()),
        )
        for at in self._transmit(name, TO_COORDINATOR, out.api, out.request_id):
            self._queue.push(at, ToCoordinator(name, slot.incarnation, out))

    def _deliver_response(self, item: ToMember) -> None:
        slot = self.slots[item.member]
        machine = slot.machine
        if not self.network.reachable(item.member):
            self._dropped(item.member, item.api, item.request_id, TO_MEMBER, "isolated")
            return
        if machine is None or slot.incarnation != item.incarnation or (stopped(machine.state) and not machine.closing):
            return
        error = response_fields(item.response)[0]  # (read by type: a getattr on ``object`` is a generic lookup)
        self.log.emit(
            self.now,
            "response_received",
            member=item.member,
            api=item.api,
            request_id=item.request_id,
            error=error._name_ if error is not None else None,  # (``_name_``: no descriptor call)
        )
        machine.on_response(item.request_id, item.response, self.now)
        self._poll(item.member)

    def _observe_member(self, name: str, slot: Slot, machine: Machine) -> None:
        notes = machine.notes
        if len(notes) > slot.seen_notes:
            for note in notes[slot.seen_notes :]:
                self.log.emit(note.at_ms, NOTE_TYPES.get(note.kind, note.kind), member=name, detail=note.detail)
            slot.seen_notes = len(notes)
        if isinstance(machine, ShareClientMember):
            self._observe_share_member(name, slot, machine)
            return
        callbacks = machine.callbacks
        if len(callbacks) > slot.seen_callbacks:
            for cb in callbacks[slot.seen_callbacks :]:
                kind = cb.kind._value_
                self.log.emit(
                    cb.at_ms,
                    "callback",
                    member=name,
                    generation=cb.generation,
                    state=kind,
                    value=len(cb.partitions),
                    detail=cb.reason,
                )
                self.log.emit_partitions(
                    self.now, kind, cb.partitions, member=name, generation=cb.generation, detail=cb.reason
                )
            slot.seen_callbacks = len(callbacks)
        last = slot.last_view
        if machine.state is not last[0] or machine.member_id != last[1] or machine.generation != last[2]:
            view = (machine.state, machine.member_id, machine.generation)
            if machine.member_id:
                self.names_by_id[machine.member_id] = name
            if isinstance(machine, ConsumerClientMember):
                if machine.member_epoch > 0 and view[2] != last[2]:
                    self.checker.joined(self.now, name, machine.member_epoch)
            elif view[0] is ClassicClientState.COMPLETING_REBALANCE and view[2] != last[2]:
                self.checker.joined(self.now, name, machine.generation)
            slot.last_view = view
            self.log.emit(
                self.now,
                "member_state",
                member=name,
                member_id=machine.member_id or None,
                generation=machine.generation,
                state=machine.state._value_,
            )
        self.checker.set_owned(self.now, name, machine.owned)

    def _observe_share_member(self, name: str, slot: Slot, machine: ShareClientMember) -> None:
        """A share member's state, id and epoch, and the partitions it fetches from (none once it stopped)."""
        last = slot.last_view
        if machine.state is not last[0] or machine.member_id != last[1] or machine.generation != last[2]:
            slot.last_view = (machine.state, machine.member_id, machine.generation)
            self.log.emit(
                self.now,
                "member_state",
                member=name,
                member_id=machine.member_id,
                generation=machine.generation,
                state=machine.state._value_,
            )
        assigned = machine.assigned if machine.state.running else frozenset()
        before = slot.share_assigned
        if assigned != before:
            slot.share_assigned = assigned
            epoch = machine.generation
            self.log.emit_partitions(
                self.now, "share_unassigned", sorted(before - assigned), member=name, generation=epoch
            )
            self.log.emit_partitions(
                self.now, "share_assigned", sorted(assigned - before), member=name, generation=epoch
            )

    # -------------------------------------------------------------------------------- the coordinator
    def _deliver_request(self, item: ToCoordinator) -> None:
        name, out = item.member, item.out
        if not self.network.reachable(name):
            self._dropped(name, out.api, out.request_id, TO_COORDINATOR, "isolated")
            return
        self._respond(self.endpoint.handle(name, item.incarnation, out, self.now))

    def _respond(self, routed: list[ToMember]) -> None:
        for r in routed:
            for at in self._transmit(r.member, TO_MEMBER, r.api, r.request_id):
                self._queue.push(at, r)
        deadline = self.endpoint.next_deadline()
        wake = self._coordinator_wake
        if deadline is not None and (wake is None or deadline < wake or wake < self.now):
            self._coordinator_wake = max(deadline, self.now)
            self._queue.push(self._coordinator_wake, CoordinatorWake())

    def _transmit(self, member: str, direction: str, api: str, request_id: int) -> tuple[int, ...]:
        sent = self.network.transmit(member, direction, self.now)
        if sent.dropped is not None:
            self._dropped(member, api, request_id, direction, sent.dropped)
        if len(sent.deliveries) > 1:
            self.log.emit(
                self.now, "message_duplicated", member=member, api=api, request_id=request_id, state=direction
            )
        return sent.deliveries

    def _dropped(self, member: str, api: str, request_id: int, direction: str, why: str) -> None:
        self.log.emit(
            self.now, "message_dropped", member=member, api=api, request_id=request_id, state=direction, detail=why
        )

    # ---------------------------------------------------------------------------------- observations
    def running(self) -> dict[str, Machine]:
        return {n: s.machine for n, s in self.slots.items() if s.machine is not None and s.machine.state.running}

    def expected_if_quiescent(self) -> frozenset[TopicPartition] | None:
        """The subscribed partitions if the group is quiescent now, else None.

        Runs after every step, so it is incremental. A member machine changes only when the simulator polls
        it, and the group only as the coordinator's events say (``endpoint.group``, which replaces a consumer
        group member's current assignment rather than changing it): so the running members are updated from
        the members polled since the last check; while a classic group keeps its generation and members only
        those members are examined again; and a consumer-group member is examined again only when it was polled
        or its current assignment was replaced. The answer is a cached frozenset, the same object while the
        running members and the topic sizes stay the same."""
        polled: set[str] = self._polled
        if polled:
            self._polled = set()
            live = self._live
            for name in polled:
                machine = self.slots[name].machine
                if machine is not None and not stopped(machine.state):
                    if name not in live:
                        live.add(name)
                        self._live_version += 1
                elif name in live:
                    live.discard(name)
                    self._live_version += 1
        group = self.endpoint.group
        if group.kind != "consumer":
            self._held.clear()
            if group.kind != "classic" or group.state != "Stable":
                self._classic_view = None
                return None
            # (the same members after a leave and a rejoin count as a change, and every member is examined
            # again, which gives the same answer, only slower)
            if self._classic_view != group.version:
                self._classic_view = group.version
                self._unsettled.clear()
                polled = self._live
            for name in polled:
                self._classify(name, group)
            if self._unsettled or not self._live or len(self._live) != len(group.members):
                return None
        else:
            self._classic_view = None
            if not self._live or not self._consumer_group_quiescent(group):
                return None
        cached = self._expected
        if cached is None or cached[0] != self._live_version or cached[1] != self._topics_version:
            topics = {t for name in self._live for t in self.slots[name].spec.topics}
            partitions = frozenset((t, p) for t in topics for p in range(self.topics.get(t, 0)))
            self._expected = cached = (self._live_version, self._topics_version, partitions)
        return cached[2]

    def _classify(self, name: str, group: ObservedGroup) -> None:
        """Whether running member ``name`` is settled in the classic ``group``'s generation."""
        machine = self.slots[name].machine
        settled = name not in self._live or (
            isinstance(machine, ClassicClientMember)
            and machine.settled()
            and machine.generation == group.generation
            and machine.member_id in group.members
        )
        (self._unsettled.discard if settled else self._unsettled.add)(name)

    def _consumer_group_quiescent(self, group: ObservedGroup) -> bool:
        """Stable at the coordinator, its members exactly the running processes, each of them owning
        exactly what the coordinator assigned it, at the member's epoch, with nothing pending."""
        if group.state != "Stable" or self.coordinator.awaits_metadata_refresh(self.group_id):
            return False  # (a topic grew: the group learns it on its next heartbeat)
        if len(group.members) != len(self._live):
            return False
        for name in self._live:
            machine = self.slots[name].machine
            assert machine is not None
            held = group.members.get(machine.member_id)
            if held is None:
                return False
            cached = self._held.get(name)
            if cached is not None and cached[0] is held and cached[1] == self._topics_version:
                settled = cached[2]
            else:
                settled = self._consumer_member_settled(machine, held)
                self._held[name] = (held, self._topics_version, settled)
            if not settled:
                return False
        return True

    def _consumer_member_settled(self, machine: Machine, held: MemberAssignmentChanged) -> bool:
        assert not isinstance(machine, ShareClientMember)  # (share members are in a group of their own)
        if machine.generation != held.member_epoch or machine.owned != self._assigned_names(held.assigned):
            return False
        return machine.settled()

    def _assigned_names(self, assigned: Partitions) -> frozenset[TopicPartition]:
        """A coordinator assignment (by topic id) as topic-name partitions; cached per assignment object (each
        current assignment the coordinator reports is a new one)."""
        cached = self._assigned_cache.get(id(assigned))
        if cached is not None and cached[0] is assigned and cached[1] == self._topics_version:
            return cached[2]
        names = self.endpoint.topic_names()
        out = frozenset((names[t], p) for t, ps in assigned if t in names for p in ps)
        if len(self._assigned_cache) > 4 * len(self._slot_list) + 64:
            self._assigned_cache.clear()
        self._assigned_cache[id(assigned)] = (assigned, self._topics_version, out)
        return out

    def forget_quiescence(self) -> None:
        """Make the next quiescence check examine every member afresh (after changes made outside steps)."""
        self._classic_view = None
        self._held.clear()
        self._polled = set(self.slots) - self._share_names

    def quiescent(self) -> bool:
        self.forget_quiescence()
        return self.expected_if_quiescent() is not None


def simulate(scenario: Scenario, seed: int = 0) -> Simulator:
    """Run ``scenario`` to its end and return the finished simulator (log, violations)."""
    sim = Simulator(scenario, seed)
    sim.run()
    sim.finish()
    return sim
