"""Join and sync payload bytes, two ways (seed 000).

* **Kafka** (the "single client assignor" design that became JoinGroup + SyncGroup): only the leader's
  JoinGroup response carries every member's metadata (Σ m bytes per round); the leader's SyncGroup request
  carries every member's assignment and each member's SyncGroup response its own (2 Σ a bytes).
* **Everyone receives everything** (seed 000's first design): every member's JoinGroup response carries
  every member's metadata, n · Σ m bytes per round: quadratic in the group size.

Sizes are the consumer protocol's real encodings (``regroup.assignors.consumer_protocol``); what the lab
leaves out is documented in docs/lab.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from regroup.assignors.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription


def join_bytes(metadata_sizes: Sequence[int]) -> tuple[int, int]:
    """One JoinGroup round: (bytes the leader alone receives, bytes when every member receives everything)."""
    total = sum(metadata_sizes)
    return total, len(metadata_sizes) * total


def sync_bytes(assignment_sizes: Iterable[int]) -> int:
    """One SyncGroup round as Kafka does it: the leader sends every assignment, each member gets its own."""
    return 2 * sum(assignment_sizes)


def subscription_bytes(topics: Sequence[str], owned: Mapping[str, Sequence[int]], generation: int) -> int:
    """Encoded Subscription (latest version) with the topics and owned partitions, no assignor user data."""
    sub = Subscription(
        topics=tuple(sorted(topics)),
        owned={t: tuple(sorted(ps)) for t, ps in sorted(owned.items())},
        generation=generation,
    )
    return len(encode_subscription(sub))


def assignment_bytes(partitions: Mapping[str, Sequence[int]]) -> int:
    """Encoded Assignment (latest version) of one member, no user data."""
    return len(encode_assignment(Assignment(partitions={t: tuple(ps) for t, ps in sorted(partitions.items())})))
