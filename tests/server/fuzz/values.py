"""Field values for kio request entities, in two moods: *plausible* (what a real client sends: known group
and topic names, small partition numbers, sane timeouts, valid consumer-protocol metadata and record
batches) for the fuzzer's seeds, and *edge* (the extremes of each wire type: empty and long strings, nulls
wherever the schema allows them, minimum and maximum integers, empty, large and duplicated arrays) for the
edge-value tests.

The same walk serves ``random.Random`` (fast, for the fuzzer's corpus) and hypothesis (``entity_strategy``,
shrinkable) through the small ``Chooser`` interface."""

from __future__ import annotations

import datetime
import random
import string
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from hypothesis import strategies as st

from regroup.assignors.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    encode_assignment,
    encode_subscription,
)
from tests.server.fuzz.schema import FieldInfo, fields_of
from tests.server_data.batches import make_batch

T = TypeVar("T")

GROUPS = ("fuzz-g0", "fuzz-g1", "fuzz-g2")
TOPICS = ("fuzz-t0", "fuzz-t1")
ASSIGNORS = ("range", "roundrobin", "cooperative-sticky", "uniform")

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "timedelta_i32": (-(2**31), 2**31 - 1),
    # a timedelta holds at most 999,999,999 days; kio writes its milliseconds through a float
    "timedelta_i64": (-(2**53), 2**53),
}
#: the longest string or bytes the edge mood writes (a classic string's int16 length caps it at 32,767)
LONG = 20_000


class Chooser(Protocol):
    """Where the choices come from."""

    def integer(self, low: int, high: int) -> int: ...
    def pick(self, options: Sequence[T]) -> T: ...
    def coin(self) -> bool: ...
    def text(self, max_size: int) -> str: ...
    def blob(self, max_size: int) -> bytes: ...


class RandomChooser:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def pick(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def coin(self) -> bool:
        return self.rng.random() < 0.5

    def text(self, max_size: int) -> str:
        return "".join(self.rng.choices(string.ascii_letters + string.digits + "-._", k=self.rng.randint(0, max_size)))

    def blob(self, max_size: int) -> bytes:
        return self.rng.randbytes(self.rng.randint(0, max_size))


class DrawChooser:
    """Choices drawn by a hypothesis ``draw`` (inside ``st.composite``)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self.draw = draw

    def integer(self, low: int, high: int) -> int:
        return int(self.draw(st.integers(low, high)))

    def pick(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(options))  # type: ignore[no-any-return]

    def coin(self) -> bool:
        return bool(self.draw(st.booleans()))

    def text(self, max_size: int) -> str:
        return str(self.draw(st.text(max_size=max_size)))

    def blob(self, max_size: int) -> bytes:
        return bytes(self.draw(st.binary(max_size=max_size)))


#: field name -> a function of the chooser giving that field's value (replaces the default choice)
Overrides = Mapping[str, Callable[[Chooser], Any]]


def entity_value(
    cls: type[T], chooser: Chooser, *, edge: bool = False, overrides: Overrides | None = None, depth: int = 0
) -> T:
    """An instance of the kio entity ``cls`` with every field chosen (tagged fields mostly left at their
    defaults, which kio then leaves out of the encoding). ``overrides`` apply at every depth; large arrays
    are drawn only at the top level (``depth`` 0), so that nested ones do not multiply."""
    kwargs: dict[str, Any] = {}
    for info in fields_of(cls):
        if info.tag is not None and (info.entity is not None or chooser.pick((True, True, False))):
            continue
        if overrides and info.name in overrides:
            kwargs[info.name] = overrides[info.name](chooser)
        else:
            kwargs[info.name] = _field_value(cls, info, chooser, edge, overrides, depth)
    return cls(**kwargs)


def entity_strategy(cls: type[T], *, edge: bool = True, overrides: Overrides | None = None) -> st.SearchStrategy[T]:
    """A hypothesis strategy of ``cls`` instances (edge values by default)."""

    @st.composite
    def build(draw: Callable[[st.SearchStrategy[Any]], Any]) -> T:
        return entity_value(cls, DrawChooser(draw), edge=edge, overrides=overrides)

    return build()


def _field_value(
    owner: type[Any], info: FieldInfo, chooser: Chooser, edge: bool, overrides: Overrides | None, depth: int
) -> Any:
    if info.nullable and chooser.pick((True, False) if edge else (True, False, False, False, False, False, False)):
        return None
    if info.array:
        count = _array_size(info, chooser, edge and depth == 0)
        if info.entity is not None:
            entity = info.entity
            items = [
                entity_value(entity, chooser, edge=edge, overrides=overrides, depth=depth + 1) for _ in range(count)
            ]
        else:
            items = [_primitive(owner, info, chooser, edge) for _ in range(count)]
        if edge and items and chooser.coin():
            items = items + items[: chooser.integer(1, len(items))]  # duplicate entries
        return tuple(items)
    if info.entity is not None:  # one nested struct (DescribeTopicPartitions' cursor)
        return entity_value(info.entity, chooser, edge=edge, overrides=overrides, depth=depth + 1)
    return _primitive(owner, info, chooser, edge)


def _array_size(info: FieldInfo, chooser: Chooser, large: bool) -> int:
    if large and chooser.pick((False, False, False, True)):
        return chooser.integer(20, 40) if info.entity is not None else chooser.integer(100, 500)
    return chooser.integer(0, 3)


def _primitive(owner: type[Any], info: FieldInfo, chooser: Chooser, edge: bool) -> Any:
    kind = info.kafka_type
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        value = edge_int(chooser, low, high) if edge else _plausible_int(info.name, chooser)
        return datetime.timedelta(milliseconds=value) if kind.startswith("timedelta") else value
    if kind == "bool":
        return chooser.coin()
    if kind == "uuid":
        if edge:
            return uuid.UUID(int=chooser.pick((0, 1, 2**128 - 1, chooser.integer(0, 2**128 - 1))))
        return uuid.UUID(int=chooser.integer(0, 2**128 - 1))
    if kind == "string":
        return edge_text(chooser) if edge else _plausible_text(owner, info.name, chooser)
    if kind in ("bytes", "records"):
        return _edge_blob(chooser) if edge else _plausible_blob(info.name, chooser)
    raise TypeError(f"no values for kafka type {kind!r} ({owner.__name__}.{info.name})")


def edge_int(chooser: Chooser, low: int, high: int) -> int:
    if chooser.coin():
        return chooser.pick((low, low + 1, -1, 0, 1, high - 1, high))
    return chooser.integer(low, high)


def edge_text(chooser: Chooser) -> str:
    """Empty, long (thousands of one character, multi-byte ones included) or short arbitrary text."""
    match chooser.integer(0, 3):
        case 0:
            return ""
        case 1:
            return chooser.pick(("x", "é", "\U0001f600", "\x00")) * chooser.integer(1000, LONG // 4)
        case _:
            return chooser.text(20)


def _edge_blob(chooser: Chooser) -> bytes:
    match chooser.integer(0, 3):
        case 0:
            return b""
        case 1:
            return chooser.pick((b"\x00", b"\xff")) * chooser.integer(1000, LONG)
        case _:
            return chooser.blob(40)


def _plausible_int(name: str, chooser: Chooser) -> int:
    lo: int
    hi: int
    if "partition" in name or name.endswith("_index"):
        lo, hi = 0, 3
    elif "generation" in name or "epoch" in name:
        lo, hi = -1, 3
    elif name == "session_timeout":
        lo, hi = 6000, 30000
    elif name == "rebalance_timeout":
        lo, hi = 1000, 30000
    elif name == "max_wait":
        lo, hi = 0, 20
    elif "timeout" in name:
        lo, hi = 0, 5000
    elif name == "acks":
        return chooser.pick((-1, 0, 1))
    elif name == "num_partitions":
        return chooser.pick((-1, 1, 2, 3))
    elif name == "replication_factor":
        return chooser.pick((-1, 1))
    elif name == "max_bytes" or name == "partition_max_bytes":
        return chooser.pick((1, 1024, 1 << 20))
    elif "offset" in name or "timestamp" in name:
        lo, hi = -2, 50
    else:
        lo, hi = -1, 5
    return chooser.integer(lo, hi)


def _plausible_text(owner: type[Any], name: str, chooser: Chooser) -> str | None:
    if name in ("group_id", "groups", "group_ids", "key", "coordinator_keys", "group_id_filter"):
        return chooser.pick(GROUPS) if chooser.coin() else "fuzz-" + chooser.text(8)
    if name == "member_id":
        return chooser.pick(("", "", "m-0", chooser.text(12)))
    if name == "group_instance_id":
        return chooser.pick(("i-0", chooser.text(6)))
    if name in ("topic", "topic_name", "topics", "topic_names", "subscribed_topic_names") or (
        name == "name" and "Topic" in owner.__name__
    ):
        return chooser.pick(TOPICS) if chooser.coin() else "fuzz-" + chooser.text(8)
    if name == "protocol_type":
        return "consumer"
    if name in ("protocol_name", "server_assignor") or (name == "name" and "Protocol" in owner.__name__):
        return chooser.pick(ASSIGNORS)
    if name == "subscribed_topic_regex":
        return chooser.pick(("fuzz-.*", "fuzz-t[01]", "("))
    if name == "client_id":
        return "fuzz"
    if name in ("transactional_id", "v3_and_below_transactional_id", "transactional_ids"):
        return chooser.pick(("fuzz-tx", "fuzz-tx", "fuzz-tx2", "", chooser.text(8)))
    if name == "transactional_id_pattern":
        return chooser.pick(("fuzz-.*", "fuzz-tx", "(", ""))
    if name == "state_filters":
        return chooser.pick(("Ongoing", "Empty", "CompleteCommit", chooser.text(6)))
    return chooser.text(12)


def _plausible_blob(name: str, chooser: Chooser) -> bytes:
    topics = tuple(chooser.pick(((), TOPICS[:1], TOPICS)))
    if name == "metadata" and chooser.pick((True, True, True, False)):
        return encode_subscription(ConsumerProtocolSubscription(topics=topics), chooser.integer(0, 3))
    if name == "assignment" and chooser.pick((True, True, True, False)):
        return encode_assignment(
            ConsumerProtocolAssignment(partitions={t: (0, 1) for t in topics}), chooser.integer(0, 3)
        )
    if name == "records" and chooser.pick((True, True, True, False)):
        values = [chooser.blob(16) for _ in range(chooser.integer(1, 3))]
        return make_batch(values, gzip_records=chooser.pick((False, False, False, True)))
    return chooser.blob(24)
