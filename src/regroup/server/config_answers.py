"""DescribeConfigs answers put together from kept pieces, a chunk of resources at a time.

A topic's described configuration is some forty entries, each with its synonyms and documentation: encoded by
kio entity by entity, about 0.4 ms a topic, so an answer for 1,000 topics (what an admin tool or a UI asks for
when it lists every topic's configuration) held the event loop for over 400 ms. What a topic's entries are
depends only on the response's version, the two ``include_`` flags, the keys asked for, the topic's overrides
and the broker's defaults; most topics have no override at all. So ``ConfigArrays`` keeps kio's encoding of
the entries by exactly that (a group's the same way: its overrides and the coordinator's settings), and an answer
writes per resource only its few header fields by hand around the kept bytes, yielding the loop between
chunks of ``RESOURCES_PER_CHUNK`` resources. A change of overrides is a new key: nothing kept is ever stale.

The layout of a result (Kafka's ``DescribeConfigsResponse.json``; flexible from v4, with compact strings and
arrays and an empty tagged-field section ending each struct): error code int16, error message nullable string,
resource type int8, resource name string, then the configs array, whose items kio writes; the fields around
the results array are kio's too (``encoded.splice_pieces``). The tests hold every version's bytes to kio's
encoding of the straightforward entity.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable
from typing import Any

from regroup.server.config_view import Described
from regroup.server.encoded import PreEncoded, array_header, entity_bytes, response_type, splice_pieces
from regroup.server.entities import build
from regroup.server.offset_answers import nullable_string, pause, string

__all__ = ["RESOURCES_PER_CHUNK", "ConfigArrays", "DescribedResult", "config_entry", "describe_configs_answer"]

#: resources answered between two yields to the event loop (a kept topic's header: a few microseconds)
RESOURCES_PER_CHUNK = 200
_HEAD = struct.Struct(">h")
_TYPE = struct.Struct(">b")

#: (error code, error message, resource type, resource name, the configs' key or None, how to describe them)
DescribedResult = tuple[int, str | None, int, str, Hashable | None, Callable[[], list[Described]]]


def config_entry(mod: Any, described: Described, synonyms: bool, docs: bool) -> Any:
    """The ``DescribeConfigsResourceResult`` entity of one described configuration in ``mod``'s version."""
    return build(
        mod.DescribeConfigsResourceResult,
        name=described.name,
        value=described.value,
        read_only=described.read_only,
        config_source=described.source,
        is_sensitive=described.sensitive,
        synonyms=[{"name": n, "value": v, "source": s} for n, v, s in described.synonyms] if synonyms else [],
        config_type=described.type,
        documentation=described.doc if docs else None,
    )


class ConfigArrays:
    """kio's encoding of configs arrays' items (their count and joined bytes), kept by version, flags and the
    caller's key for what decides the entries; the least recently added go first past ``capacity``."""

    def __init__(self, capacity: int = 1024) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._kept: dict[Hashable, tuple[int, bytes]] = {}

    def __len__(self) -> int:
        return len(self._kept)

    def items(
        self, mod: Any, synonyms: bool, docs: bool, key: Hashable | None, describe: Callable[[], list[Described]]
    ) -> tuple[int, bytes]:
        """(count, bytes) of the entries ``describe`` gives, kept under ``key`` (None: never kept)."""
        full = None if key is None else (mod.__name__, synonyms, docs, key)
        if full is not None:
            found = self._kept.get(full)
            if found is not None:
                return found
        described = describe()
        made = (len(described), b"".join(entity_bytes(config_entry(mod, d, synonyms, docs)) for d in described))
        if full is not None:
            kept = self._kept
            if len(kept) >= self.capacity:
                del kept[next(iter(kept))]
            kept[full] = made
        return made


async def describe_configs_answer(
    mod: Any, empty: Any, results: list[DescribedResult], arrays: ConfigArrays, synonyms: bool, docs: bool
) -> PreEncoded:
    """The DescribeConfigs answer ``empty`` (the response entity of the request's version, kio module ``mod``, no
    results) with ``results``: each resource's header written here, its configs from ``arrays``."""
    flexible = bool(type(empty).__flexible__)
    parts: list[bytes] = []
    errors: list[int] = []
    for index, (code, message, resource_type, name, key, describe) in enumerate(results):
        if index and index % RESOURCES_PER_CHUNK == 0:
            await pause()
        count, items = (0, b"") if code else arrays.items(mod, synonyms, docs, key, describe)
        parts.append(_HEAD.pack(code))
        parts.append(nullable_string(message, flexible))
        parts.append(_TYPE.pack(resource_type))
        parts.append(string(name, flexible))
        parts.append(array_header(count, flexible))
        parts.append(items)
        if flexible:
            parts.append(b"\x00")
        if code:
            errors.append(code)
    return PreEncoded(response_type(empty), splice_pieces(empty, "results", len(results), parts), tuple(errors))
