"""Hypothesis strategies for kio entities: any valid instance of a request (or nested) entity class, built from
its dataclass fields (``kafka_type``, arrays, nullables, nested entities), so it encodes with kio's writer."""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from types import NoneType, UnionType
from typing import Any

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)


def entities(cls: type[Any], max_items: int = 3) -> st.SearchStrategy[Any]:
    """Any instance of the kio entity ``cls``."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: _field(f, hints[f.name], max_items) for f in dataclasses.fields(cls)}
    return st.fixed_dictionaries(fields).map(lambda values: cls(**values))


def _field(f: dataclasses.Field[Any], hint: Any, max_items: int) -> st.SearchStrategy[Any]:
    inner, nullable = _strip_optional(hint)
    tagged = "tag" in f.metadata
    if typing.get_origin(inner) is tuple:
        element = typing.get_args(inner)[0]
        items = st.lists(_value(f, element, max_items), max_size=max_items).map(tuple)
        return st.none() | items if nullable else items
    value = _value(f, inner, max_items)
    if nullable and (not tagged or dataclasses.is_dataclass(inner)):
        return st.none() | value
    return value


def _value(f: dataclasses.Field[Any], value_type: Any, max_items: int) -> st.SearchStrategy[Any]:
    if isinstance(value_type, type) and dataclasses.is_dataclass(value_type):
        return st.deferred(lambda: entities(value_type, max(max_items - 1, 0)))
    kafka_type = f.metadata["kafka_type"]
    if kafka_type in _INTS:
        low, high = _INTS[kafka_type]
        return st.integers(low, high)
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "float64":
        return st.floats(allow_nan=False)
    if kafka_type == "string":
        return _TEXT
    if kafka_type in ("bytes", "records"):
        return st.binary(max_size=16)
    if kafka_type == "uuid":
        return st.uuids().filter(lambda u: u.int != 0) | st.just(uuid.UUID(int=0))
    if kafka_type == "error_code":
        return st.sampled_from(list(ErrorCode))
    if kafka_type == "timedelta_i32":
        return st.integers(-(2**31), 2**31 - 1).map(lambda n: datetime.timedelta(milliseconds=n))
    if kafka_type == "timedelta_i64":
        return st.integers(-(2**40), 2**40).map(lambda n: datetime.timedelta(milliseconds=n))
    if kafka_type == "datetime_i64":
        return st.integers(0, 2**40).map(lambda n: datetime.datetime.fromtimestamp(n / 1000, tz=datetime.UTC))
    raise TypeError(f"{f.name}: no strategy for kafka_type {kafka_type!r}")


def _strip_optional(hint: Any) -> tuple[Any, bool]:
    if isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not NoneType]
        return args[0], len(args) < len(typing.get_args(hint))
    return hint, False
