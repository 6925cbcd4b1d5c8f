"""The request schemas the fuzzer speaks: every (API key, version) the server advertises, and a flat
description of each kio entity's fields (primitive or nested, array, nullable, tagged) read from the
dataclass fields and their ``kafka_type`` metadata."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from kio.index import load_request_schema

from regroup.server.handlers.registry import load_specs


@dataclass(frozen=True, slots=True)
class FieldInfo:
    name: str
    #: kio's wire type (``int32``, ``string``, ``records``, ...) or ``entity`` for a nested struct
    kafka_type: str
    array: bool
    #: the value (the array itself, for arrays) may be None
    nullable: bool
    entity: type[Any] | None
    tag: int | None
    #: the declared default, or ``dataclasses.MISSING``
    default: Any


def served_versions() -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version, as the server's handler registry advertises them."""
    return {key: (spec.min_version, spec.max_version) for key, spec in sorted(load_specs().items())}


def served_requests() -> list[tuple[int, int, type[Any]]]:
    """(api key, version, kio request class) for every version of every API served."""
    return [
        (key, version, load_request_schema(key, version))
        for key, (low, high) in served_versions().items()
        for version in range(low, high + 1)
    ]


def fields_of(cls: type[Any]) -> tuple[FieldInfo, ...]:
    """The fields of the kio entity ``cls`` in declaration (= wire) order, tagged ones included."""
    known = _FIELDS.get(cls)
    if known is None:
        known = _FIELDS[cls] = _fields_of(cls)
    return known


_FIELDS: dict[type[Any], tuple[FieldInfo, ...]] = {}


def _fields_of(cls: type[Any]) -> tuple[FieldInfo, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for field in dataclasses.fields(cls):
        hint, nullable = _strip_none(hints[field.name])
        array = typing.get_origin(hint) is tuple
        if array:
            hint, _ = _strip_none(typing.get_args(hint)[0])
        entity = hint if dataclasses.is_dataclass(hint) and isinstance(hint, type) else None
        kafka_type = "entity" if entity is not None else str(field.metadata["kafka_type"])
        default: Any = field.default
        if default is dataclasses.MISSING and field.default_factory is not dataclasses.MISSING:
            default = cast(Callable[[], Any], field.default_factory)()
        tag = field.metadata.get("tag")
        out.append(FieldInfo(field.name, kafka_type, array, nullable, entity, tag, default))
    return tuple(out)


def _strip_none(hint: Any) -> tuple[Any, bool]:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(hint))
    return hint, False
