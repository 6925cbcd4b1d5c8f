"""The undo journal of one coordinator operation: what makes "a refused request changes nothing" a guarantee.

While an operation runs, every change it makes to the coordinator's in-memory state outside a classic
group's own fields goes through here and leaves an entry saying how to take it back: a group added to or
removed from the namespace, a consumer-group record applied (the group's fields and members it replaced),
a timer scheduled or cancelled, a group's soft state set. When the operation raises (an ``ApiError``: the
request is refused; or any other exception), the facade drops the records and responses it produced and
rolls the journal back in reverse order, so the coordinator is exactly as it was before it; when it
returns, the journal is simply cleared. Classic groups' own fields are changed by their handlers in place,
only after every check that can refuse the request (Kafka's order of checks); the refused-operation
property test (tests/property/test_refused_requests.py) holds that order.

Loading (replaying records) and timer expiry run with the journal inactive: nothing to take back.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, Final


class _Missing:
    """The value of a key a mapping did not have."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


class Journal:
    __slots__ = ("active", "entries")

    def __init__(self) -> None:
        self.active = False
        self.entries: list[Callable[[], None]] = []

    # ----------------------------------------------------------------------------------- recording changes
    def put(self, mapping: MutableMapping[Any, Any], key: Any, value: Any) -> None:
        """``mapping[key] = value``, taken back by restoring the key's previous value (or its absence)."""
        if self.active:
            self.entries.append(_restore_entry(mapping, key, mapping.get(key, MISSING)))
        mapping[key] = value

    def remove(self, mapping: MutableMapping[Any, Any], key: Any) -> Any:
        """``mapping.pop(key, None)``, taken back by putting the value back."""
        old = mapping.pop(key, MISSING)
        if old is MISSING:
            return None
        if self.active:
            self.entries.append(_restore_entry(mapping, key, old))
        return old

    def set(self, obj: object, name: str, value: Any) -> None:
        """``setattr(obj, name, value)``, taken back by setting the previous value again."""
        if self.active:
            old = getattr(obj, name)
            self.entries.append(lambda: setattr(obj, name, old))
        setattr(obj, name, value)

    def undo(self, action: Callable[[], None]) -> None:
        """Record how to take back a change made by the caller (only while an operation runs)."""
        if self.active:
            self.entries.append(action)

    # --------------------------------------------------------------------------------- the operation's end
    def begin(self) -> None:
        self.active = True
        self.entries.clear()

    def commit(self) -> None:
        self.active = False
        self.entries.clear()

    def rollback(self) -> None:
        """Take back every recorded change, newest first; the journal is then inactive and empty."""
        self.active = False
        entries = self.entries
        while entries:
            entries.pop()()


def _restore_entry(mapping: MutableMapping[Any, Any], key: Any, old: Any) -> Callable[[], None]:
    def restore() -> None:
        if old is MISSING:
            mapping.pop(key, None)
        else:
            mapping[key] = old

    return restore
