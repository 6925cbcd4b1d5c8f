"""What every simulated consumer member does with the partitions it owns, whatever its protocol: notes,
the rebalance callbacks it records (revoked, lost), committing before giving partitions up, and the close
sequence (the leave waits for the synchronous commit of the closing revocation and the callback's work, as
``KafkaConsumer.close()`` and librdkafka's close do). The classic and the KIP-848 member mix this in; each
says which generation/epoch its callbacks carry, how it commits and how it leaves."""

from __future__ import annotations

from abc import ABC, abstractmethod

from regroup.client.types import (
    CallbackEvent,
    CallbackKind,
    Inflight,
    MemberNote,
    TopicPartition,
    sorted_partitions,
)


class OwnedPartitions(ABC):
    """Mixin: requires ``owned``, ``callbacks``, ``notes`` and ``config.auto_commit`` on the member."""

    owned: frozenset[TopicPartition]
    callbacks: list[CallbackEvent]
    notes: list[MemberNote]
    inflight: dict[int, Inflight]
    #: closing: the commit the leave waits for, when the leave goes out, then the leave the close waits
    #: for (None, None, None: not closing)
    close_commit_id: int | None
    close_leave_at_ms: int | None
    close_leave_id: int | None

    @property
    @abstractmethod
    def callback_generation(self) -> int:
        """The generation (classic) or member epoch (KIP-848) a callback is recorded with."""

    @property
    @abstractmethod
    def auto_commit(self) -> bool:
        """Commit before revoking."""

    @property
    @abstractmethod
    def commit_on_revoke(self) -> bool:
        """Commit synchronously inside ``onPartitionsRevoked`` (the application model)."""

    @property
    @abstractmethod
    def revoke_work_ms(self) -> int:
        """How long the application's revocation callback works (after its commit)."""

    @abstractmethod
    def send_leave(self, now_ms: int) -> None:
        """Send the request that leaves the group (closing), its id in ``close_leave_id``."""

    @abstractmethod
    def commit(self, partitions: frozenset[TopicPartition], now_ms: int) -> int | None:
        """OffsetCommit of ``partitions`` at their processed position; its request id (None: nothing sent)."""

    def note(self, now_ms: int, kind: str, detail: str) -> None:
        self.notes.append(MemberNote(at_ms=now_ms, kind=kind, detail=detail))

    def callback(self, kind: CallbackKind, partitions: frozenset[TopicPartition], now_ms: int, reason: str) -> None:
        self.callbacks.append(
            CallbackEvent(
                kind=kind,
                partitions=sorted_partitions(partitions),
                at_ms=now_ms,
                generation=self.callback_generation,
                reason=reason,
            )
        )

    def revoke(self, partitions: frozenset[TopicPartition], now_ms: int, reason: str) -> None:
        """Commit (auto-commit) then ``onPartitionsRevoked``; the partitions stop being processed."""
        if self.auto_commit:
            self.commit(partitions, now_ms)
        self.callback(CallbackKind.REVOKED, partitions, now_ms, reason)
        self.owned = self.owned - partitions

    def revoke_in_poll(self, partitions: frozenset[TopicPartition], now_ms: int, reason: str) -> int | None:
        """``onPartitionsRevoked`` run by the application's poll: the partitions stop being processed now and
        are committed when the application commits on revoke (the callback waits for that commit: its request
        id, None when none was sent) or auto-commits (sent, not waited for). Eager revocations are logged even
        when empty."""
        self.callback(CallbackKind.REVOKED, partitions, now_ms, reason)
        self.owned = self.owned - partitions
        if not partitions:
            return None
        if self.commit_on_revoke:
            return self.commit(partitions, now_ms)
        if self.auto_commit:
            self.commit(partitions, now_ms)
        return None

    def lose(self, now_ms: int, reason: str) -> None:
        """``onPartitionsLost`` for everything owned (no commit: someone else may own them now)."""
        if self.owned:
            self.callback(CallbackKind.LOST, self.owned, now_ms, reason)
            self.owned = frozenset()

    # --- closing ----------------------------------------------------------------------------------------
    def revoke_on_close(self, partitions: frozenset[TopicPartition], now_ms: int) -> int | None:
        """``onPartitionsRevoked`` run by ``close()``: processing stops now; the application's commit
        (``commit_on_revoke``) or the client's own auto-commit on close is synchronous. Returns the commit's
        request id, which the leave waits for (None: nothing to wait for)."""
        self.callback(CallbackKind.REVOKED, partitions, now_ms, "consumer closed")
        self.owned = self.owned - partitions
        if self.commit_on_revoke or self.auto_commit:
            return self.commit(partitions, now_ms)
        return None

    def leave_after(self, commit_id: int | None, now_ms: int) -> None:
        """Leave once the closing commit ``commit_id`` is answered (or has timed out) and the revocation
        callback's work is done; at once when there is neither."""
        work = self.revoke_work_ms
        if commit_id is None and work <= 0:
            self.send_leave(now_ms)
            return
        self.close_commit_id = commit_id
        self.close_leave_at_ms = None if commit_id is not None else now_ms + work

    @property
    def closing(self) -> bool:
        """Closed, and ``close()`` has not returned yet: its leave is not sent or not answered."""
        return self.close_commit_id is not None or self.close_leave_at_ms is not None or self.close_leave_id is not None

    def close_step(self, now_ms: int) -> None:
        """The next step of a close: the commit answered (or timed out) starts the callback's work; the
        work done sends the leave; the leave answered (or timed out) ends the close."""
        commit_id = self.close_commit_id
        if commit_id is not None:
            if self._waiting(commit_id, now_ms):
                return
            self.close_commit_id = None
            self.close_leave_at_ms = now_ms + self.revoke_work_ms
        leave_at = self.close_leave_at_ms
        if leave_at is not None:
            if now_ms < leave_at:
                return
            self.close_leave_at_ms = None
            self.send_leave(now_ms)
        leave_id = self.close_leave_id
        if leave_id is not None and not self._waiting(leave_id, now_ms):
            self.close_leave_id = None

    def _waiting(self, request_id: int, now_ms: int) -> bool:
        waiting = self.inflight.get(request_id)
        return waiting is not None and now_ms < waiting.deadline_ms

    def close_deadline(self) -> int | None:
        """When ``close_step`` has something to do (None: not closing)."""
        for request_id in (self.close_commit_id, self.close_leave_id):
            if request_id is not None:
                waiting = self.inflight.get(request_id)
                return waiting.deadline_ms if waiting is not None else 0
        return self.close_leave_at_ms
