"""What every simulated consumer member does with the partitions it owns, whatever its protocol: notes,
the rebalance callbacks it records (revoked, lost), and committing before giving partitions up. The classic
and the KIP-848 member mix this in; each says which generation/epoch its callbacks carry and how it
commits."""

from __future__ import annotations

from abc import ABC, abstractmethod

from regroup.client.types import CallbackEvent, CallbackKind, MemberNote, TopicPartition, sorted_partitions


class OwnedPartitions(ABC):
    """Mixin: requires ``owned``, ``callbacks``, ``notes`` and ``config.auto_commit`` on the member."""

    owned: frozenset[TopicPartition]
    callbacks: list[CallbackEvent]
    notes: list[MemberNote]

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
