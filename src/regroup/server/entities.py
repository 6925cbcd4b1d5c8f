"""Version-agnostic construction of kio entities.

kio generates one dataclass per API version; fields come and go between versions (``throttle_time`` from
v1 or v2, ``group_instance_id`` from v5, ...). ``build(cls, **values)`` fills the fields ``cls`` has from
``values`` and ignores the rest, so a handler describes a response once and builds it at whatever version
the client asked for. Values are plain Python: ints for durations (milliseconds), our ``ErrorCode`` (or
any int) for error codes, lists of dicts for nested arrays, a dict for a nested entity.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode as KioErrorCode

E = TypeVar("E")
_TIMEDELTA_TYPES = {"timedelta_i32", "timedelta_i64"}
_Coerce = Callable[[Any], Any]


def build(cls: type[E], /, **values: Any) -> E:
    """An instance of the kio entity ``cls`` from the values its version carries (see the module doc)."""
    kwargs: dict[str, Any] = {}
    for name, coerce in _plan(cls):
        if name in values:
            kwargs[name] = coerce(values[name])
    return cls(**kwargs)


def ms(value: datetime.timedelta) -> int:
    """A kio duration field as whole milliseconds (Kafka's wire unit)."""
    return int(value / _ONE_MS)


_ONE_MS = datetime.timedelta(milliseconds=1)


_PLANS: dict[type[Any], tuple[tuple[str, _Coerce], ...]] = {}


def _plan(cls: type[Any]) -> tuple[tuple[str, _Coerce], ...]:
    """(field name, coercion) for every field of ``cls``, computed once per class."""
    plan = _PLANS.get(cls)
    if plan is None:
        hints = typing.get_type_hints(cls)
        plan = _PLANS[cls] = tuple((f.name, _coercer(f, hints[f.name])) for f in dataclasses.fields(cls))
    return plan


def _coercer(field: dataclasses.Field[Any], hint: Any) -> _Coerce:
    kafka_type = field.metadata.get("kafka_type")
    if kafka_type in _TIMEDELTA_TYPES:
        return _to_timedelta
    if kafka_type == "error_code":
        return _to_error_code
    element = _array_element(hint)
    if element is not None:
        return _array_of(element)
    nested = _nested_entity(hint)
    if nested is not None:
        return _one_of(nested)
    return _identity


def _nested_entity(hint: Any) -> type[Any] | None:
    """``X`` for a nested entity field typed ``X`` or ``X | None``, else None."""
    candidates = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    for candidate in candidates:
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            return candidate
    return None


def _one_of(entity: type[Any]) -> _Coerce:
    def coerce(value: Any) -> Any:
        if value is None or isinstance(value, entity):
            return value
        return build(entity, **_as_mapping(value))

    return coerce


def _array_element(hint: Any) -> type[Any] | None:
    """``X`` for ``tuple[X, ...]`` or ``tuple[X, ...] | None`` when ``X`` is an entity, else None."""
    candidates = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    for candidate in candidates:
        if typing.get_origin(candidate) is tuple:
            args = typing.get_args(candidate)
            if args and dataclasses.is_dataclass(args[0]) and isinstance(args[0], type):
                return args[0]
    return None


def _array_of(element: type[Any]) -> _Coerce:
    def coerce(value: Any) -> Any:
        if value is None:
            return None
        return tuple(item if isinstance(item, element) else build(element, **_as_mapping(item)) for item in value)

    return coerce


def _as_mapping(item: Any) -> Mapping[str, Any]:
    if isinstance(item, Mapping):
        return item
    raise TypeError(f"expected a mapping for a nested entity, got {type(item).__name__}")


def _to_timedelta(value: Any) -> Any:
    return datetime.timedelta(milliseconds=value) if isinstance(value, int) else value


def _to_error_code(value: Any) -> KioErrorCode:
    return value if isinstance(value, KioErrorCode) else KioErrorCode(int(value))


def _identity(value: Any) -> Any:
    return value
