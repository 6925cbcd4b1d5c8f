"""An answer given at once whose value comes later: a request handled from its bytes without a coroutine (a
Produce under ``--fsync always``, appended at once and answered once its fsync is done) hands its connection a
``Deferred`` instead of its response; whoever finishes the work settles it, once, and the connection's callback then
writes the response in its place in request order.

It is a single-callback, single-assignment cell, cheaper than a future with its done-callback list, its context
copy and its scheduling through the loop: ``settle`` calls the callback in place (the caller is on the loop
already)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["Deferred"]

T = TypeVar("T")
#: ``callback(value, error)``: exactly one of them is None unless the value itself is
Settled = Callable[[Any, BaseException | None], None]


class Deferred(Generic[T]):
    """A value to come: ``settle(value)`` or ``fail(error)`` once; ``then(callback)`` once."""

    __slots__ = ("_callback", "_error", "_settled", "_value")

    def __init__(self) -> None:
        self._callback: Settled | None = None
        self._settled = False
        self._value: T | None = None
        self._error: BaseException | None = None

    @classmethod
    def failed(cls, error: BaseException) -> Deferred[T]:
        """One failed already (an answer that went wrong after its request took effect: its connection closes,
        rather than the request being handled a second time)."""
        deferred: Deferred[T] = cls()
        deferred.fail(error)
        return deferred

    @property
    def settled(self) -> bool:
        return self._settled

    @property
    def outcome(self) -> tuple[T | None, BaseException | None]:
        """(value, error) once settled."""
        if not self._settled:
            raise RuntimeError("not settled yet")
        return self._value, self._error

    def then(self, callback: Settled) -> None:
        """Call ``callback(value, error)`` once settled (now, when it is already)."""
        if self._callback is not None:
            raise RuntimeError("a Deferred takes one callback")
        self._callback = callback
        if self._settled:
            callback(self._value, self._error)

    def settle(self, value: T) -> None:
        self._finish(value, None)

    def fail(self, error: BaseException) -> None:
        self._finish(None, error)

    def _finish(self, value: T | None, error: BaseException | None) -> None:
        if self._settled:
            raise RuntimeError("a Deferred is settled once")
        self._settled, self._value, self._error = True, value, error
        if self._callback is not None:
            self._callback(value, error)
