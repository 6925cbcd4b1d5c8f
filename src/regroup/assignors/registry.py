"""Strategies by name: the built-in ones plus any plug-in exposed through the ``regroup.assignors``
entry point group (``name = "package.module:AssignorClass"``)."""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from importlib.metadata import entry_points

from mypy_extensions import mypyc_attr

from regroup.assignors.base import PartitionAssignor

ENTRY_POINT_GROUP = "regroup.assignors"

# name -> "module:Class", imported lazily so a broken plug-in cannot break the others.
_BUILTIN: dict[str, str] = {
    "range": "regroup.assignors.range:RangeAssignor",
    "roundrobin": "regroup.assignors.roundrobin:RoundRobinAssignor",
    "sticky": "regroup.assignors.sticky:StickyAssignor",
    "cooperative-sticky": "regroup.assignors.cooperative_sticky:CooperativeStickyAssignor",
    "optimal": "regroup.assignors.sticky:OptimalAssignor",
    "uniform": "regroup.assignors.uniform:UniformAssignor",
    "server-range": "regroup.assignors.server_range:ServerRangeAssignor",
    "redundant": "regroup.assignors.redundant:RedundantAssignor",
    "copartitioned": "regroup.assignors.copartitioned:CopartitionedAssignor",
    "consistent-hash": "regroup.assignors.consistent_hash:ConsistentHashAssignor",
}

_custom: dict[str, Callable[[], PartitionAssignor]] = {}

#: The strategies KIP-848 groups can use server-side: regroup's strategy name (the one name used everywhere:
#: ``regroup strategies``, grids, scenarios, ``serve --consumer-assignors``, reports) -> the name Kafka's clients
#: send as ``group.remote.assignor`` and brokers list in ``group.consumer.assignors``, accepted as an alias where
#: only a server-side assignor can be meant. ``uniform`` and ``server-range`` exist only server-side (their
#: ``server_side`` is set); ``optimal`` and ``consistent-hash`` are also client-side strategies of the classic
#: protocol, run server-side on each member's current target.
SERVER_SIDE: dict[str, str] = {
    "uniform": "uniform",
    "server-range": "range",
    "optimal": "optimal",
    "consistent-hash": "consistent-hash",
}

#: Kafka's broker also takes its built-in assignors by class name in ``group.consumer.assignors``
KAFKA_SERVER_CLASSES: dict[str, str] = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "server-range",
}


def server_side_name(name: str) -> str | None:
    """regroup's name of the KIP-848 server-side assignor ``name`` stands for (``range`` → ``server-range``;
    Kafka's class names of its two), or None if it names none."""
    if name in SERVER_SIDE:
        return name
    if name in KAFKA_SERVER_CLASSES:
        return KAFKA_SERVER_CLASSES[name]
    for ours, kafkas in SERVER_SIDE.items():
        if kafkas == name:
            return ours
    return None


def wire_name(name: str) -> str:
    """The name a client sends for the server-side assignor ``name`` (any of its names; ``server-range`` →
    ``range``)."""
    ours = server_side_name(name)
    if ours is None:
        raise UnknownAssignorError(name)
    return SERVER_SIDE[ours]


@mypyc_attr(native_class=False)  # (a builtin exception base: kept a Python class when compiled)
class UnknownAssignorError(KeyError):
    """No strategy is registered under that name."""

    def __str__(self) -> str:
        return f"unknown assignment strategy {self.args[0]!r}; known: {', '.join(available())}"


def register(name: str, factory: Callable[[], PartitionAssignor]) -> None:
    """Register a strategy factory under ``name`` (overrides a plug-in of the same name)."""
    _custom[name] = factory


@mypyc_attr(native_class=False)  # (a builtin exception base: kept a Python class when compiled)
class AssignorLoadError(RuntimeError):
    """A registered strategy (usually a plug-in) could not be imported."""


def _load(name: str, target: str) -> Callable[[], PartitionAssignor]:
    module_name, _, attr = target.partition(":")
    try:
        factory: Callable[[], PartitionAssignor] = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise AssignorLoadError(f"strategy {name!r} ({target}) could not be loaded: {exc}") from exc
    return factory


def _plugins() -> dict[str, str]:
    return dict(_plugins_on(tuple(sys.path)))


@functools.lru_cache(maxsize=8)
def _plugins_on(path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The installed plug-ins, looked up once per import path: scanning every distribution's metadata takes
    milliseconds, and simulations and sweeps ask for strategies thousands of times."""
    return tuple((ep.name, ep.value) for ep in entry_points(group=ENTRY_POINT_GROUP))


def available() -> list[str]:
    """Every known strategy name, sorted."""
    return sorted(set(_BUILTIN) | set(_plugins()) | set(_custom))


def get(name: str) -> PartitionAssignor:
    """A fresh instance of the strategy called ``name``."""
    if name in _custom:
        return _custom[name]()
    target = _BUILTIN.get(name) or _plugins().get(name)
    if target is None:
        raise UnknownAssignorError(name)
    return _load(name, target)()
