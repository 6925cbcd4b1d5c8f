"""An assignment kept in the optimal engine's arrays and read as ``member -> topic -> partitions`` only where
someone reads it.

The engine computes per member an array of global partition indices (``layout``). Turning a million of them
into Python lists and dicts costs several times the assignment itself, and most readers want a few members
(a coordinator writing the targets that changed, a leader encoding one member's answer at a time) or the
arrays themselves (metrics, the next run's claims, ``regroup assign``'s JSON). ``ArrayAssignment`` is a
read-only ``Mapping`` over the spec's members: a member's view is built on first read and kept; reading every
member at once (``items``, ``values``, equality) builds all of them in one vectorised pass.

Interpreted in the compiled build (``tools/compiled.py``): a ``Mapping`` subclass cannot be a compiled class.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from regroup.assignors.balance import Outcome
from regroup.assignors.layout import IntArray, Layout, stable_argsort
from regroup.assignors.lazy_assignment import LazyAssignment
from regroup.assignors.spec import AssignmentDict


class ArrayAssignment(LazyAssignment):
    """member -> topic -> ascending partitions, over ``layout``'s members, from per-member global indices."""

    def __init__(self, layout: Layout, outcome: Outcome) -> None:
        #: member -> its index in ``layout.member_names`` (and in the outcome's arrays)
        self.position: dict[str, int] = {name: i for i, name in enumerate(layout.member_names)}
        super().__init__(self.position)
        self.layout = layout
        self.outcome = outcome

    def build_one(self, member: str) -> dict[str, list[int]]:
        return self._view(self.position[member])

    def build_all(self) -> AssignmentDict:
        return self.layout.to_assignment(self.outcome.per_member)

    def owned(self, member: str) -> OwnedView:
        """The member's partitions as the ``owned`` of its next subscription (``OwnedView``)."""
        return OwnedView(self, member)

    def member_array(self, member: str) -> IntArray:
        """The member's partitions as global indices (``layout``), in any order."""
        return self.outcome.member_parts(self.position[member])

    def _view(self, i: int) -> dict[str, list[int]]:
        parts = np.sort(self.outcome.member_parts(i))
        if not len(parts):
            return {}
        offsets = self.layout.offsets
        topics = np.searchsorted(offsets, parts, side="right") - 1
        local = (parts - offsets[topics]).tolist()
        cuts = [0, *(np.flatnonzero(np.diff(topics)) + 1).tolist(), len(local)]
        names = self.layout.topic_names
        first = topics[cuts[:-1]].tolist()
        return {names[t]: local[a:b] for t, a, b in zip(first, cuts, cuts[1:], strict=False)}


class LatestAssignment:
    """The latest of a series of ``ArrayAssignment``s (a coordinator's successive targets of one group): the
    ``OwnedView``s made from it read whichever is ``current``, so a member whose partitions did not change
    between two results keeps the very same view (and the subscription holding it)."""

    __slots__ = ("current",)

    def __init__(self, current: ArrayAssignment) -> None:
        self.current = current

    def owned(self, member: str) -> OwnedView:
        return OwnedView(self, member)


class OwnedView(Mapping[str, tuple[int, ...]]):
    """One member's partitions in an ``ArrayAssignment`` (or the current one of a ``LatestAssignment``) as a
    spec's ``owned`` (topic -> ascending partitions), built when read. The next engine run over the same topics
    reads the array itself (``claims_from_views``): the previous result goes back in without a partition being
    converted either way."""

    def __init__(self, source: ArrayAssignment | LatestAssignment, member: str) -> None:
        self._source = source
        self.member = member
        self._read: dict[str, tuple[int, ...]] | None = None
        self._read_from: ArrayAssignment | None = None

    @property
    def source(self) -> ArrayAssignment:
        """The assignment the view reads now."""
        source = self._source
        return source.current if isinstance(source, LatestAssignment) else source

    def _view(self) -> dict[str, tuple[int, ...]]:
        source = self.source
        if self._read is None or self._read_from is not source:
            self._read = {t: tuple(ps) for t, ps in source[self.member].items()}
            self._read_from = source
        return self._read

    def __getitem__(self, topic: str) -> tuple[int, ...]:
        return self._view()[topic]

    def __iter__(self) -> Iterator[str]:
        return iter(self._view())

    def __len__(self) -> int:
        return len(self._view())

    def __repr__(self) -> str:
        return f"OwnedView({self._view()!r})"


class ViewScan:
    """Where the views among a list of ``owned`` come from (``scan_views``)."""

    __slots__ = ("source", "viewed", "viewers")

    def __init__(self, source: ArrayAssignment, viewers: list[int], viewed: list[str]) -> None:
        #: the one assignment every view reads
        self.source = source
        #: the positions in the list holding a view, and the member each one views
        self.viewers = viewers
        self.viewed = viewed


def scan_views(owned: Sequence[Mapping[str, Sequence[int]]]) -> ViewScan | None:
    """The views of ``owned`` when every non-empty one is an ``OwnedView`` and they all read one assignment; None
    otherwise, or when there is no view."""
    held: ArrayAssignment | LatestAssignment | None = None  # (what the views hold: most often one object)
    source: ArrayAssignment | None = None
    viewers: list[int] = []
    viewed: list[str] = []
    for i, one in enumerate(owned):
        if isinstance(one, OwnedView):
            if one._source is not held:
                if source is None:
                    source = one.source
                elif one.source is not source:
                    return None
                held = one._source
            viewers.append(i)
            viewed.append(one.member)
        elif len(one):
            return None
    return None if source is None else ViewScan(source, viewers, viewed)


def _same_numbering(source: ArrayAssignment, layout: Layout) -> bool:
    before = source.layout
    return before.topic_names == layout.topic_names and bool(np.array_equal(before.counts, layout.counts))


def claims_from_views(
    layout: Layout, owned: Sequence[Mapping[str, Sequence[int]]], scan: ViewScan | None = None
) -> tuple[IntArray, ...] | None:
    """Each member's owned partitions as global indices of ``layout`` (what ``Layout.claims_of`` gives, in any
    order) read straight from the arrays, when every non-empty ``owned`` is an ``OwnedView`` of one assignment
    over the very same topics and partition counts; None otherwise. ``scan``: ``scan_views(owned)``, when the
    caller has it."""
    if scan is None:
        scan = scan_views(owned)
    if scan is None or not _same_numbering(scan.source, layout):
        return None
    source = scan.source
    per_member = source.outcome.per_member
    empty = np.empty(0, dtype=np.int64)
    out = [empty] * len(owned)
    for i, member in zip(scan.viewers, map(source.position.__getitem__, scan.viewed), strict=True):
        out[i] = per_member[member]
    return tuple(out)


def flat_claims_from_views(
    layout: Layout, owned: Sequence[Mapping[str, Sequence[int]]], scan: ViewScan | None = None
) -> tuple[IntArray, IntArray] | None:
    """What ``claims_from_views`` reads, flat and from the assignment's owner array instead of its per-member
    arrays: the claimed partitions and the member (index in ``owned``) claiming each, by member then partition.
    None where ``claims_from_views`` is, and when two members' views read the same member or the assignment
    gives a partition to several members (then the claims are not one owner array)."""
    if scan is None:
        scan = scan_views(owned)
    if scan is None or not _same_numbering(scan.source, layout):
        return None
    source = scan.source
    owner = source.outcome.owner_array(layout.partition_total)
    if owner is None:
        return None
    viewed, viewers = scan.viewed, scan.viewers
    old = np.fromiter(map(source.position.__getitem__, viewed), dtype=np.int64, count=len(viewed))
    if len(old) and int(np.bincount(old).max()) > 1:
        return None
    # the source's members as claimers (-1: nobody), one more entry so that an owner of -1 maps to -1
    claimer_of = np.full(len(source.layout.member_names) + 1, -1, dtype=np.int64)
    claimer_of[old] = np.fromiter(viewers, dtype=np.int64, count=len(viewers))
    claimer = claimer_of[owner]
    parts = np.flatnonzero(claimer >= 0)
    members = claimer[parts]
    order = stable_argsort(members)  # (stable: each member's partitions stay ascending)
    return parts[order], members[order]
