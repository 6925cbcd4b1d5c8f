"""The coordinator's side of the simulated network: hands each arriving request to the real
``GroupCoordinator`` under a fresh request key, fires its timers, routes the completed responses back to
the member that sent them, and observes the group for the event log and the safety checker: the outcome of
every offset commit, and what the core's result says changed (``coordinator/events.py``), folded into
``group`` (``observed.ObservedGroup``: the group's type, state, generation, members and their epochs and
assignments). An operation without events or records (a heartbeat that changed nothing) is not looked at.
A classic group's ``group_state`` row comes from its last transition in the call and its ``group_assignment``
rows from the assignments the generation stored, so each call logs at most one ``group_state`` row, as the
golden logs hold. A KIP-848 group's row comes from its last state event in the call, with the assignor its
members prefer and its count of classic-protocol members read from the facade's read-only summary, and the
epoch the coordinator holds for each member is checked after every call that changed one. Share members'
requests go to ``share`` (``share_endpoint.ShareEndpoint``, set by the simulator when a scenario has them).

The simulator is a shell: it changes the coordinator only through its operations and reads it only through
its events and its read-only views.
"""

from __future__ import annotations

from regroup.assignors.registry import server_side_name
from regroup.client import OutgoingRequest
from regroup.client.types import TopicPartition, api_name
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import AssignmentStored, GroupStateChanged
from regroup.coordinator.result import Result
from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest
from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest
from regroup.protocol.offsets import OffsetCommitRequest, OffsetCommitResponse
from regroup.protocol.share import ShareGroupHeartbeatRequest
from regroup.protocol.share_fetch import ShareAcknowledgeRequest, ShareFetchRequest
from regroup.sim.checks import SafetyChecker
from regroup.sim.describe import assigned_partitions, response_detail, response_fields
from regroup.sim.eventlog import EventLog
from regroup.sim.observed import ObservedGroup
from regroup.sim.queue import ToMember
from regroup.sim.share_endpoint import ShareEndpoint


class CoordinatorEndpoint:
    def __init__(
        self,
        coordinator: GroupCoordinator,
        group_id: str,
        log: EventLog,
        checker: SafetyChecker,
        names_by_id: dict[str, str],
    ) -> None:
        self.coordinator = coordinator
        self.group_id = group_id
        self.log = log
        self.checker = checker
        self.names_by_id = names_by_id
        self._keys: dict[int, tuple[str, int, int, str]] = {}
        self._next_key = 1
        #: the scenario's group as the core's events describe it
        self.group = ObservedGroup(group_id)
        self._group_view: tuple[str, int] = ("", -1)
        self._kind = "classic"
        self._member_epochs: dict[str, int] = {}  # consumer group: member id -> epoch the coordinator holds
        self._names: tuple[object, dict[object, str]] = (None, {})
        #: the share members' side, when the scenario has share members
        self.share: ShareEndpoint | None = None

    def handle(self, member: str, incarnation: int, out: OutgoingRequest, now: int) -> list[ToMember]:
        """One request arrives at ``now``: run it and return the responses it completed."""
        key = self._next_key
        self._next_key += 1
        self._keys[key] = (member, incarnation, out.request_id, out.api)
        self.log.emit(now, "request_received", member=member, api=out.api, request_id=out.request_id)
        req, c = out.request, self.coordinator
        if isinstance(req, ShareGroupHeartbeatRequest | ShareFetchRequest | ShareAcknowledgeRequest):
            assert self.share is not None, "a share request in a scenario without share members"
            return self.share.handle(key, out, now)
        if isinstance(req, JoinGroupRequest):
            result = c.join_group(req, key, now)
        elif isinstance(req, SyncGroupRequest):
            result = c.sync_group(req, key, now)
        elif isinstance(req, HeartbeatRequest):
            result = c.heartbeat(req, key, now)
        elif isinstance(req, LeaveGroupRequest):
            result = c.leave_group(req, key, now)
        elif isinstance(req, ConsumerGroupHeartbeatRequest):
            result = c.consumer_group_heartbeat(req, key, now)
        else:
            assert isinstance(req, OffsetCommitRequest)
            fenced = self._fenced_reason(req)
            result = c.offset_commit(req, key, now)
            self._commit_outcome(now, member, req, result.response_for(key), fenced)
        routed = self.route(result, now)
        if self.share is not None:  # (an acknowledgement's release, or a timer, may let a waiting fetch go on)
            routed += self.share.advance(now)
        return routed

    def set_topics(self, topics: dict[str, int], now: int) -> list[ToMember]:
        """Hand the coordinator the cluster image of ``topics`` (ids from ``topic_id_for``)."""
        image = ClusterImage.of(
            TopicImage(topic_id=topic_id_for(name), name=name, partitions=count)
            for name, count in sorted(topics.items())
        )
        if self.share is not None:
            self.share.topics_changed(topics, now)
        return self.route(self.coordinator.update_metadata(image, now), now)

    def advance(self, now: int) -> list[ToMember]:
        """Fire the coordinator's due timers (session expiry, join and sync phase timeouts, lapsed share locks);
        waiting share fetches look again."""
        if self.share is not None:
            return self.share.advance(now)
        return self.route(self.coordinator.advance(now), now)

    def next_deadline(self) -> int | None:
        deadline = self.coordinator.next_deadline()
        if self.share is not None:
            waiting = self.share.next_deadline()
            if waiting is not None and (deadline is None or waiting < deadline):
                return waiting
        return deadline

    def disconnect(self, member_id: str, now: int) -> list[ToMember]:
        """A share member's connection dropped (its process crashed)."""
        return [] if self.share is None else self.share.disconnect(member_id, now)

    # ------------------------------------------------------------------------------------- internals
    def new_key(self) -> int:
        """A request key for an operation the endpoint runs itself (its completion is not routed)."""
        key = self._next_key
        self._next_key += 1
        return key

    def forget(self, key: int) -> None:
        """A request that will never be answered (its connection is gone)."""
        self._keys.pop(key, None)

    def route(self, result: Result, now: int) -> list[ToMember]:
        """Observe what ``result`` changed and route the responses it completed."""
        if result.events or result.records:  # (a group changes only through records or with events)
            self._observe_group(now, result)
            if self.share is not None:
                self.share.observe(now, result)
        routed: list[ToMember] = []
        for completion in result.completions:
            assert isinstance(completion.key, int)
            done = self.complete(completion.key, completion.response, now)
            if done is not None:
                routed.append(done)
        return routed

    def complete(self, key: int, response: object, now: int) -> ToMember | None:
        """Answer the request under ``key`` (None: nobody waits for it)."""
        target = self._keys.pop(key, None)
        if target is None:
            return None
        member, incarnation, request_id, api = target
        error, generation, member_id = response_fields(response)
        self.log.emit(
            now,
            "response_sent",
            member=member,
            api=api,
            request_id=request_id,
            generation=generation,
            member_id=member_id,
            error=error._name_ if error is not None else None,  # (``_name_``: no descriptor call)
            detail=response_detail(response, self.topic_names()),
        )
        return ToMember(member, incarnation, request_id, api_name(response), response)

    def topic_names(self) -> dict[object, str]:
        """Topic id -> name in the coordinator's cluster image (rebuilt when the image is replaced)."""
        image = self.coordinator.image
        if self._names[0] is not image:
            self._names = (image, {t.topic_id: t.name for t in image.by_name.values()})
        return self._names[1]

    def _fenced_reason(self, req: OffsetCommitRequest) -> str | None:
        """Why the committing member is fenced right now (None when it is a member of the current
        generation): from the group as the events before the coordinator handles the commit describe it."""
        group = self.group
        kind = group.kind if req.group_id == self.group_id else ""
        if kind == "consumer":
            held = group.members.get(req.member_id)
            if held is None:
                return f"member id {req.member_id!r} is not in the consumer group"
            if req.generation_id != held.member_epoch:
                return f"epoch {req.generation_id} is not the member's {held.member_epoch}"
            return None
        if kind != "classic" or req.member_id not in group.members:
            return f"member id {req.member_id!r} is not in the group"
        if req.generation_id != group.generation:
            return f"generation {req.generation_id} is not the group's {group.generation}"
        return None

    def _commit_outcome(
        self, now: int, member: str, req: OffsetCommitRequest, resp: object, fenced: str | None
    ) -> None:
        if not isinstance(resp, OffsetCommitResponse):
            return
        offsets = {(t, p.partition): p.offset for t, parts in req.topics for p in parts}
        accepted: list[TopicPartition] = []
        # (one batch row for a commit whose partitions share their offset and outcome, as a member's do)
        rows = [((topic, partition), offsets.get((topic, partition)), code) for topic, results in resp.topics
                for partition, code in results]  # fmt: skip
        if rows and all(offset == rows[0][1] and code is rows[0][2] for _, offset, code in rows):
            code = rows[0][2]
            self.log.emit_partitions(
                now,
                "offset_commit",
                [pair for pair, _, _ in rows],
                member=member,
                member_id=req.member_id,
                generation=req.generation_id,
                value=rows[0][1],
                error=code.name,
            )
            if code is ErrorCode.NONE:
                accepted = [pair for pair, _, _ in rows]
        else:
            for (topic, partition), offset, code in rows:
                self.log.emit(
                    now,
                    "offset_commit",
                    member=member,
                    member_id=req.member_id,
                    generation=req.generation_id,
                    topic=topic,
                    partition=partition,
                    value=offset,
                    error=code.name,
                )
                if code is ErrorCode.NONE:
                    accepted.append((topic, partition))
        self.checker.commit(now, member, fenced, accepted)

    def _observe_group(self, now: int, result: Result) -> None:
        group = self.group
        # the group as this call left it, and what the call said of it: a classic group's last transition and
        # the assignments its generation stored (a call that made it Stable stored them), a consumer group's
        # last state, and the members whose epoch or presence changed
        changed: GroupStateChanged | None = None
        changed_consumer: GroupStateChanged | None = None
        stored: AssignmentStored | None = None
        touched: set[str] | None = None
        group_id = self.group_id
        for event in result.events:
            member_id = group.apply(event)
            if member_id is not None:
                if touched is None:
                    touched = set()
                touched.add(member_id)
            elif isinstance(event, GroupStateChanged):
                if event.group_id == group_id:
                    if event.group_type == "classic":
                        changed = event
                    elif event.group_type == "consumer":
                        changed_consumer = event
            elif isinstance(event, AssignmentStored) and event.group_id == group_id:
                stored = event
        kind = "consumer" if group.kind == "consumer" else "classic"
        if kind != self._kind:
            # An empty group of one type is replaced by a new group of the other type, which starts over at
            # generation/epoch 0 (docs/protocol.md, X04 and X16); a non-empty one is converted and keeps
            # counting up.
            if self._group_view[0] in ("Empty", "Dead", ""):
                self.checker.group_replaced()
            self._kind = kind
        if kind == "consumer":
            self._observe_consumer_group(now, changed_consumer, touched)
            return
        self._member_epochs.clear()
        if changed is None:
            return
        view = (changed.state, changed.generation)
        if view == self._group_view:
            return
        self._group_view = view
        dead = changed.state == "Dead"
        if not dead:
            # a dead group repeats the generation it died at: no new generation to check, and after an empty
            # consumer group was deleted by a classic join (docs/protocol.md, X16) it would make the next
            # group's generation 0 look like a step back
            self.checker.group_generation(now, view[1])
        detail = None
        if not dead and changed.protocol:
            leader = self.names_by_id.get(changed.leader or "", changed.leader)
            detail = f"protocol={changed.protocol} leader={leader}"
        self.log.emit(now, "group_state", state=view[0], generation=view[1], detail=detail)
        if changed.state != "Stable" or stored is None:
            return
        for member_id, _, assignment in stored.assignments:
            self.log.emit_partitions(
                now,
                "group_assignment",
                assigned_partitions(assignment),
                member=self.names_by_id.get(member_id, member_id),
                member_id=member_id,
                generation=stored.generation,
            )

    def _observe_consumer_group(self, now: int, changed: GroupStateChanged | None, touched: set[str] | None) -> None:
        """A KIP-848 group: the epoch the coordinator holds for each member whose epoch changed (never lower
        unless the member starts over at 0 or is removed); its state (Empty/Assigning/Reconciling/Stable) and
        group epoch when they changed; each member's current assignment once the group is Stable."""
        members = self.group.members
        if touched is not None:
            epochs = self._member_epochs
            for member_id in sorted(touched):
                held = members.get(member_id)
                if held is None:
                    epochs.pop(member_id, None)
                    continue
                epoch = held.member_epoch
                last = epochs.get(member_id)
                if last is not None and 0 < epoch < last:
                    name = self.names_by_id.get(member_id, member_id)
                    why = f"the coordinator moved {name} back to epoch {epoch}"
                    self.checker.violation(now, ("coordinator-epoch", member_id, epoch), why)
                epochs[member_id] = epoch
        if changed is None:
            return  # (its state and epochs are as the last state event said)
        view = (changed.state, changed.generation)
        if view == self._group_view:
            return
        self._group_view = view
        self.checker.group_generation(now, view[1])
        summary = self.coordinator.consumer_group_summary(self.group_id)
        assert summary is not None
        assignor, classic = summary.assignor, summary.classic_members
        detail = f"type=consumer assignor={server_side_name(assignor) or assignor} classic_members={classic}"
        self.log.emit(now, "group_state", state=view[0], generation=view[1], detail=detail)
        if changed.state != "Stable":
            return
        names_of = self.topic_names()
        for member_id, held in members.items():
            self.log.emit_partitions(
                now,
                "group_assignment",
                sorted((names_of[t], p) for t, ps in held.assigned if t in names_of for p in ps),
                member=self.names_by_id.get(member_id, member_id),
                member_id=member_id,
                generation=view[1],
            )
