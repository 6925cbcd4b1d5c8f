"""The coordinator's one group namespace: a group id names at most one group, of exactly one type (classic,
consumer; share and streams groups would join them), plus the cluster image consumer groups resolve their
subscriptions against.

Handlers ask for the type they serve (``groups.typed(group_id, ClassicGroup)``: None when the id is free or
names a group of another type) and add or remove groups through the operation's journal, so a refused
operation leaves the namespace as it was. What the coordinator asks of every group, whatever its type, is
the ``GroupType`` interface (``group_type.py``)."""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from typing import Protocol, TypeVar

from regroup.coordinator.journal import Journal
from regroup.model.cluster import ClusterImage

G = TypeVar("G")


class Group(Protocol):
    """What every group in the namespace has, whatever its type."""

    @property
    def group_id(self) -> str: ...

    @property
    def members(self) -> Mapping[str, object]: ...


class Groups:
    __slots__ = ("by_id", "image")

    def __init__(self, image: ClusterImage | None = None) -> None:
        #: group id -> the group (an instance of one registered group type's class)
        self.by_id: dict[str, Group] = {}
        self.image = ClusterImage() if image is None else image

    def get(self, group_id: str) -> Group | None:
        return self.by_id.get(group_id)

    def typed(self, group_id: str, cls: type[G]) -> G | None:
        """The group ``group_id`` names if it is a ``cls``; None if there is none or it is of another type."""
        group = self.by_id.get(group_id)
        return group if isinstance(group, cls) else None

    def of_type(self, cls: type[G]) -> Iterator[G]:
        """The groups of one type, in the namespace's order."""
        for group in self.by_id.values():
            if isinstance(group, cls):
                yield group

    def add(self, journal: Journal, group: Group) -> None:
        """Put ``group`` under its id (replacing whatever was there: the caller has retired it)."""
        journal.put(self.by_id, group.group_id, group)

    def remove(self, journal: Journal, group_id: str) -> None:
        journal.remove(self.by_id, group_id)

    def __contains__(self, group_id: object) -> bool:
        return group_id in self.by_id

    def __len__(self) -> int:
        return len(self.by_id)

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_id)

    def items(self) -> ItemsView[str, Group]:
        return self.by_id.items()

    def values(self) -> ValuesView[Group]:
        return self.by_id.values()
