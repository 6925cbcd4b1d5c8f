"""The read-only mapping a strategy returns when it can say each member's assignment without building all of
them: ``member -> topic -> partitions``, a member's built on its first read and kept, every member's built in
one pass (``build_all``) by whoever reads them all (``items``, ``values``, equality, ``to_dict``, or reading
more than ``READ_ONE_BY_ONE`` members one at a time).

Interpreted in the compiled build (``tools/compiled.py``): a ``Mapping`` subclass cannot be a compiled class.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import ItemsView, Iterator, Mapping, ValuesView

from regroup.assignors.spec import AssignmentDict

#: members read one at a time before the rest are built in one pass (a reader walking every member)
READ_ONE_BY_ONE = 16


class LazyAssignment(Mapping[str, dict[str, list[int]]]):
    """Over ``members`` (keys: the member ids, in the result's order); subclasses say how one member's view and
    all of them are built."""

    def __init__(self, members: Mapping[str, object]) -> None:
        self.members = members
        self._read: dict[str, dict[str, list[int]]] = {}
        self._all: AssignmentDict | None = None

    @abstractmethod
    def build_one(self, member: str) -> dict[str, list[int]]:
        """One member's view (topics in sorted order, partitions ascending)."""

    @abstractmethod
    def build_all(self) -> AssignmentDict:
        """Every member's view, in ``members``' order."""

    def __getitem__(self, member: str) -> dict[str, list[int]]:
        if self._all is not None:
            return self._all[member]
        view = self._read.get(member)
        if view is None:
            if member not in self.members:
                raise KeyError(member)
            if len(self._read) >= READ_ONE_BY_ONE:  # a reader going through every member: build them all
                return self.to_dict()[member]
            view = self._read[member] = self.build_one(member)
        return view

    def __iter__(self) -> Iterator[str]:
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)

    def __contains__(self, member: object) -> bool:
        return member in self.members

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_dict()!r})"

    def items(self) -> ItemsView[str, dict[str, list[int]]]:
        return self.to_dict().items()

    def values(self) -> ValuesView[dict[str, list[int]]]:
        return self.to_dict().values()

    def to_dict(self) -> AssignmentDict:
        """Every member's view, built in one pass (and kept: do not change it)."""
        if self._all is None:
            views = self.build_all()
            views.update(self._read)  # (a view already handed out stays the one object for its member)
            self._all = views
        return self._all
