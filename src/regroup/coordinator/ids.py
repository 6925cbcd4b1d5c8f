"""Where member ids come from. The core never calls ``uuid4``: the server injects a random source, the
simulator and the tests a seeded counter, so runs are reproducible."""

from __future__ import annotations

from typing import Protocol


class IdSource(Protocol):
    def unique_suffix(self) -> str:
        """A suffix no other member id of this coordinator has used."""
        ...


class CountingIds:
    """Deterministic ids: ``00000000-0000-0000-0000-000000000001``, ``...0002``, ..."""

    def __init__(self, start: int = 1) -> None:
        self._next = start

    def unique_suffix(self) -> str:
        n = self._next
        self._next += 1
        text = f"{n:032x}"
        return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def member_id_for(prefix: str, ids: IdSource) -> str:
    """Kafka's generated member id: ``<group.instance.id or client.id>-<unique suffix>``."""
    return f"{prefix}-{ids.unique_suffix()}"
