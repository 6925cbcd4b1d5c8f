"""Compact internal representation of a group spec for the fast assignors.

Topics are numbered in sorted order and every partition gets a *global index*
``offsets[topic] + partition``, so assignments become NumPy integer arrays instead of millions of tuples.
Members are numbered in sorted member-id order. The public API stays plain; this module converts both ways.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from regroup.assignors.spec import AssignmentDict, GroupSpec

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Layout:
    """Topic and member numbering for one spec (only existing topics someone subscribes to)."""

    topic_names: tuple[str, ...]
    topic_index: Mapping[str, int]
    counts: IntArray
    offsets: IntArray  # len(topics) + 1; offsets[-1] is the number of partitions
    member_names: tuple[str, ...]
    member_topics: tuple[IntArray, ...]  # per member: sorted topic indices it subscribes to (existing ones)
    #: what ``arcs`` computed, kept for the next reader (the engine and the claims' resolution both read them)
    _arcs: list[tuple[IntArray, IntArray]] = field(default_factory=list, compare=False, repr=False)

    @property
    def partition_total(self) -> int:
        return int(self.offsets[-1])

    def arcs(self) -> tuple[IntArray, IntArray]:
        """Every (topic, member) subscription as two arrays, member by member, each member's topics ascending:
        the topic and the member of each."""
        if not self._arcs:
            member_topics = self.member_topics
            m = len(member_topics)
            sizes = np.fromiter(map(len, member_topics), dtype=np.int64, count=m)
            arc_topic = np.concatenate(member_topics).astype(np.int64, copy=False) if m else np.empty(0, np.int64)
            self._arcs.append((arc_topic, np.repeat(np.arange(m, dtype=np.int64), sizes)))
        return self._arcs[0]

    @property
    def topic_of(self) -> IntArray:
        """Global partition index -> topic index."""
        return np.repeat(np.arange(len(self.topic_names), dtype=np.int64), self.counts)

    def global_indices(self, owned: Mapping[str, Sequence[int]]) -> IntArray:
        """Global indices of ``owned`` partitions that exist; unknown topics and out-of-range partitions are
        dropped (as Kafka does)."""
        return self.claims_of([owned])[0]

    def claims_of(self, owned: Sequence[Mapping[str, Sequence[int]]]) -> tuple[IntArray, ...]:
        """``global_indices`` for many members at once (one pass, vectorised)."""
        empty = tuple(np.empty(0, dtype=np.int64) for _ in owned)
        with gc_paused():
            entries = np.fromiter(map(len, owned), dtype=np.int64, count=len(owned))
            if entries.sum() == 0:
                return empty
            keys = list(itertools.chain.from_iterable(c.keys() for c in owned))
            lengths = np.fromiter(
                map(len, itertools.chain.from_iterable(c.values() for c in owned)), dtype=np.int64, count=len(keys)
            )
            topic_ids = np.fromiter(
                map(self.topic_index.get, keys, itertools.repeat(-1)), dtype=np.int64, count=len(keys)
            )
            flat = np.fromiter(
                itertools.chain.from_iterable(itertools.chain.from_iterable(c.values() for c in owned)),
                dtype=np.int64,
                count=int(lengths.sum()),
            )
        entry_member = np.repeat(np.arange(len(owned), dtype=np.int64), entries)
        member_of = np.repeat(entry_member, lengths)
        topic_of = np.repeat(topic_ids, lengths)
        known = topic_of >= 0
        flat, member_of, topic_of = flat[known], member_of[known], topic_of[known]
        ok = (flat >= 0) & (flat < self.counts[topic_of])
        glob = flat[ok] + self.offsets[topic_of[ok]]
        member_of = member_of[ok]
        order = np.lexsort((glob, member_of))
        glob, member_of = glob[order], member_of[order]
        keep = np.ones(len(glob), dtype=bool)  # drop duplicates within a member
        keep[1:] = (glob[1:] != glob[:-1]) | (member_of[1:] != member_of[:-1])
        glob, member_of = glob[keep], member_of[keep]
        bounds = np.searchsorted(member_of, np.arange(len(owned) + 1))
        return tuple(glob[bounds[i] : bounds[i + 1]] for i in range(len(owned)))

    def to_assignment(self, per_member: Sequence[IntArray]) -> AssignmentDict:
        """Per-member global index arrays (any order) -> member -> topic -> sorted partitions."""
        names = self.topic_names
        sizes = np.fromiter((len(a) for a in per_member), dtype=np.int64, count=len(per_member))
        out: AssignmentDict = {m: {} for m in self.member_names}
        if sizes.sum() == 0:
            return out
        member_of = np.repeat(np.arange(len(per_member), dtype=np.int64), sizes)
        flat = np.concatenate([np.sort(a) for a in per_member])
        topics = np.searchsorted(self.offsets, flat, side="right") - 1
        local = (flat - self.offsets[topics]).tolist()
        change = np.flatnonzero((np.diff(topics) != 0) | (np.diff(member_of) != 0)) + 1
        starts = [0, *change.tolist()]
        ends = [*change.tolist(), len(local)]
        # groups are ordered by member; cut them per member
        member_bounds = np.searchsorted(member_of[starts], np.arange(len(per_member) + 1)).tolist()
        with gc_paused():  # millions of small lists: the cyclic collector would rescan them over and over
            group_names = list(map(names.__getitem__, topics[starts].tolist()))
            group_slices = list(map(local.__getitem__, map(slice, starts, ends)))
            for i, member in enumerate(self.member_names):
                a, b = member_bounds[i], member_bounds[i + 1]
                if a != b:
                    out[member] = dict(zip(group_names[a:b], group_slices[a:b], strict=True))
        return out


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many acyclic containers (lists of ints, dicts
    of lists): they can never form cycles, and collections triggered by their allocation only cost time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def number_topics(
    topics: Mapping[str, int], names: Iterable[str]
) -> tuple[list[str], dict[str, int], IntArray, IntArray]:
    """The topics of ``names`` that have partitions, sorted, numbered from 0; their partition counts; and each
    one's first global partition index (``offsets``, one more entry: the total)."""
    numbered = sorted({t for t in names if topics.get(t, 0) > 0})
    topic_index = {t: i for i, t in enumerate(numbered)}
    counts = np.fromiter((topics[t] for t in numbered), dtype=np.int64, count=len(numbered))
    offsets = np.zeros(len(numbered) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return numbered, topic_index, counts, offsets


def build_layout(spec: GroupSpec) -> Layout:
    """Number the spec's topics and members."""
    # members usually share their topics tuple: distinct objects first (by identity: a tuple of a hundred
    # names hashes its hundred names every time), then distinct values
    objects = {id(sub.topics): sub.topics for sub in spec.members.values()}
    distinct = set(objects.values())
    subscribed, topic_index, counts, offsets = number_topics(spec.topics, (t for topics in distinct for t in topics))
    member_names = tuple(sorted(spec.members))
    by_topics = {
        topics: np.array(sorted({topic_index[t] for t in topics if t in topic_index}), dtype=np.int64)
        for topics in distinct
    }
    by_object = {key: by_topics[topics] for key, topics in objects.items()}
    members = spec.members
    member_topics = tuple(by_object[id(members[m].topics)] for m in member_names)
    return Layout(
        topic_names=tuple(subscribed),
        topic_index=topic_index,
        counts=counts,
        offsets=offsets,
        member_names=member_names,
        member_topics=member_topics,
    )


def stable_argsort(keys: IntArray) -> IntArray:
    """Stable argsort, using NumPy's O(n) radix sort when the keys fit in 16 bits."""
    if len(keys) and int(keys.min()) >= 0 and int(keys.max()) < 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable").astype(np.int64)
    return np.argsort(keys, kind="stable").astype(np.int64)
