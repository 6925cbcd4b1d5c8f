"""Each group's own configuration (KIP-848's dynamic group configuration: the GROUP resource of DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs): the settings Kafka defines for a group, their checks, and the
overrides, kept durably in ``group-configs.json`` of the data directory.

The settings are Kafka's (``GroupConfig``). ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms`` override the broker's for the group's consumer-protocol members, and the
coordinator acts on them (``coordinator/group_config.py``; docs/protocol.md, K22); so does
``consumer.assignment.interval.ms``, the least time between two of the group's target computations (KIP-1263).
``share.session.timeout.ms``, ``share.heartbeat.interval.ms``, ``share.assignment.interval.ms`` and
``share.record.lock.duration.ms`` do the same for share groups;
``share.auto.offset.reset`` is read by the shell when it initializes a share partition, and
``share.isolation.level`` by ShareFetch on every read (so a change applies from the group's next fetch).

Checks, as Kafka's ``GroupConfig.validate`` makes them on the group's whole configuration after the change: a
name Kafka does not define, a value that is not an integer (for the integer settings) or outside its range, a
string that is not one of its values (``share.isolation.level`` in lower case only, as Kafka's validator has
it), and a session timeout not above its heartbeat interval are INVALID_CONFIG. The ranges are the broker's:
``group.consumer.min.session.timeout.ms`` to ``group.consumer.max.session.timeout.ms`` (45 s to 60 s),
``group.consumer.min.heartbeat.interval.ms`` to ``group.consumer.max.heartbeat.interval.ms`` (5 s to 15 s), the
same for share groups, 15 s to 60 s for the record lock, and ``group.consumer.min.assignment.interval.ms`` to
``group.consumer.max.assignment.interval.ms`` (0 to 15 s; regroup's bounds; the same for share groups) for the
assignment interval, the one integer setting that may be 0; where a ``regroup serve`` flag sets the broker's own
session timeout, heartbeat interval, record lock duration or assignment interval outside its range, the range
is widened to include it (a setting the broker runs with is one a group may have).

A shell module; :class:`GroupConfigStore` does the file I/O.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.group_config import GroupConfig
from regroup.storage.files import write_file_atomically
from regroup.storage.format import CorruptLogError
from regroup.storage.topic_config import ConfigError, ConfigType

__all__ = [
    "GROUP_CONFIG_FILE",
    "GROUP_KEYS",
    "MAX_CONFIGURED_GROUPS",
    "GroupConfigStore",
    "GroupKey",
    "Ranges",
    "core_group_config",
    "core_group_configs",
    "group_defaults",
    "validate_group_configs",
]

GROUP_CONFIG_FILE: Final = "group-configs.json"
#: most groups that may have a configuration at once (each alteration rewrites the file)
MAX_CONFIGURED_GROUPS: Final = 10_000
MAX_INT: Final = 2**31 - 1

CONSUMER_SESSION: Final = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT: Final = "consumer.heartbeat.interval.ms"
CONSUMER_ASSIGNMENT: Final = "consumer.assignment.interval.ms"
SHARE_SESSION: Final = "share.session.timeout.ms"
SHARE_HEARTBEAT: Final = "share.heartbeat.interval.ms"
SHARE_ASSIGNMENT: Final = "share.assignment.interval.ms"
SHARE_LOCK: Final = "share.record.lock.duration.ms"
SHARE_RESET: Final = "share.auto.offset.reset"
SHARE_ISOLATION: Final = "share.isolation.level"
READ_COMMITTED: Final = "read_committed"
READ_UNCOMMITTED: Final = "read_uncommitted"
#: ``share.auto.offset.reset=by_duration:<ISO 8601 duration>``: start at the first record no older than that
BY_DURATION: Final = "by_duration:"


@dataclass(frozen=True, slots=True)
class Ranges:
    """The broker's bounds for the groups' settings (Kafka's ``group.consumer.*`` and ``group.share.*``)."""

    consumer_session: tuple[int, int]
    consumer_heartbeat: tuple[int, int]
    consumer_assignment: tuple[int, int] = (0, 15_000)
    share_session: tuple[int, int] = (45_000, 60_000)
    share_heartbeat: tuple[int, int] = (5_000, 15_000)
    share_lock: tuple[int, int] = (15_000, 60_000)
    share_assignment: tuple[int, int] = (0, 15_000)

    @staticmethod
    def of(config: CoordinatorConfig) -> Ranges:
        session, heartbeat = config.consumer_group_session_timeout_ms, config.consumer_group_heartbeat_interval_ms
        share_session, share_heartbeat = config.share_group_session_timeout_ms, config.share_group_heartbeat_interval_ms
        lock = config.share_group_record_lock_duration_ms
        assignment = config.consumer_group_assignment_interval_ms
        return Ranges(
            consumer_session=(min(45_000, session), max(60_000, session)),
            consumer_heartbeat=(min(5_000, heartbeat), max(15_000, heartbeat)),
            consumer_assignment=(
                min(config.consumer_group_min_assignment_interval_ms, assignment),
                max(config.consumer_group_max_assignment_interval_ms, assignment),
            ),
            share_session=(min(45_000, share_session), max(60_000, share_session)),
            share_heartbeat=(min(5_000, share_heartbeat), max(15_000, share_heartbeat)),
            share_lock=(
                min(config.share_group_min_record_lock_duration_ms, lock),
                max(config.share_group_max_record_lock_duration_ms, lock),
            ),
            share_assignment=(
                min(config.share_group_min_assignment_interval_ms, config.share_group_assignment_interval_ms),
                max(config.share_group_max_assignment_interval_ms, config.share_group_assignment_interval_ms),
            ),
        )


@dataclass(frozen=True, slots=True)
class GroupKey:
    name: str
    type: ConfigType
    doc: str
    #: the broker's value, for a group without its own
    default: Callable[[CoordinatorConfig], str]
    #: the bounds of an integer setting, from the broker's ranges (None: not an integer)
    bounds: Callable[[Ranges], tuple[int, int]] | None = None
    #: the values a string setting may take
    choices: tuple[str, ...] = ()
    #: whether a string setting's value must be one of ``choices`` as written (Kafka's ``in`` validator), not in
    #: any case (its case-insensitive one)
    exact_case: bool = False
    #: the least an integer setting may be whatever the broker's ranges
    at_least: int = 1


GROUP_KEYS: Final[Mapping[str, GroupKey]] = {
    k.name: k
    for k in (
        GroupKey(
            CONSUMER_SESSION,
            ConfigType.INT,
            "The timeout to detect client failures when using the consumer group protocol.",
            lambda c: str(c.consumer_group_session_timeout_ms),
            lambda r: r.consumer_session,
        ),
        GroupKey(
            CONSUMER_HEARTBEAT,
            ConfigType.INT,
            "The heartbeat interval given to the members of a consumer group.",
            lambda c: str(c.consumer_group_heartbeat_interval_ms),
            lambda r: r.consumer_heartbeat,
        ),
        GroupKey(
            CONSUMER_ASSIGNMENT,
            ConfigType.INT,
            "The interval between assignment updates for a consumer group.",
            lambda c: str(c.consumer_group_assignment_interval_ms),
            lambda r: r.consumer_assignment,
            at_least=0,
        ),
        GroupKey(
            SHARE_SESSION,
            ConfigType.INT,
            "The timeout to detect client failures when using the share group protocol.",
            lambda c: str(c.share_group_session_timeout_ms),
            lambda r: r.share_session,
        ),
        GroupKey(
            SHARE_HEARTBEAT,
            ConfigType.INT,
            "The heartbeat interval given to the members of a share group.",
            lambda c: str(c.share_group_heartbeat_interval_ms),
            lambda r: r.share_heartbeat,
        ),
        GroupKey(
            SHARE_ASSIGNMENT,
            ConfigType.INT,
            "The interval between assignment updates for a share group.",
            lambda c: str(c.share_group_assignment_interval_ms),
            lambda r: r.share_assignment,
            at_least=0,
        ),
        GroupKey(
            SHARE_LOCK,
            ConfigType.INT,
            "The record acquisition lock duration in milliseconds for share groups.",
            lambda c: str(c.share_group_record_lock_duration_ms),
            lambda r: r.share_lock,
        ),
        GroupKey(
            SHARE_RESET,
            ConfigType.STRING,
            "The strategy to initialize the share-partition start offset.",
            lambda c: "latest",
            choices=("latest", "earliest", "by_duration:<ISO 8601 duration>"),
        ),
        GroupKey(
            SHARE_ISOLATION,
            ConfigType.STRING,
            "How the share group reads records written in transactions: read_committed delivers only those of "
            "committed transactions, read_uncommitted every record, aborted ones too. Records written outside a "
            "transaction are delivered either way.",
            lambda c: READ_UNCOMMITTED,
            choices=(READ_COMMITTED, READ_UNCOMMITTED),
            exact_case=True,
        ),
    )
}


def group_defaults(config: CoordinatorConfig) -> dict[str, str]:
    """Every group setting's value for a group without its own."""
    return {name: key.default(config) for name, key in GROUP_KEYS.items()}


def _normalised(key: GroupKey, value: str, ranges: Ranges) -> str:
    if key.bounds is not None:
        return _integer(key, key.bounds(ranges), value)
    return _choice(key, value)


def _integer(key: GroupKey, bounds: tuple[int, int], value: str) -> str:
    text = value.strip()
    try:
        number = int(text)
    except ValueError:
        raise ConfigError(f"Invalid value {value} for configuration {key.name}: Not a number of type INT") from None
    if not -(2**31) <= number <= MAX_INT:
        raise ConfigError(f"Invalid value {value} for configuration {key.name}: Not a number of type INT")
    if number < key.at_least:
        raise ConfigError(f"Invalid value {number} for configuration {key.name}: Value must be at least {key.at_least}")
    low, high = bounds
    if number < low:
        raise ConfigError(f"{key.name} must be greater than or equal to {low}")
    if number > high:
        raise ConfigError(f"{key.name} must be less than or equal to {high}")
    return str(number)


def _choice(key: GroupKey, value: str) -> str:
    text = value.strip()
    normal = text if key.exact_case else text.lower()
    if key.name == SHARE_RESET and normal.startswith(BY_DURATION):
        if parse_duration_ms(text[len(BY_DURATION) :]) is None:
            raise ConfigError(f"Invalid value {value} for configuration {key.name}: not an ISO 8601 duration")
        return BY_DURATION + text[len(BY_DURATION) :].upper()
    if normal not in key.choices:
        raise ConfigError(
            f"Invalid value {value} for configuration {key.name}: String must be one of: {', '.join(key.choices)}"
        )
    return normal


_DURATION: Final = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?", re.IGNORECASE
)


def parse_duration_ms(text: str) -> int | None:
    """An ISO 8601 duration of days, hours, minutes and seconds (``P1DT2H``, ``PT30M``) in ms; None if bad."""
    match = _DURATION.fullmatch(text)
    if match is None or not any(match.groupdict().values()) or text.upper().endswith("T"):
        return None
    days, hours, minutes = (int(match.group(g) or 0) for g in ("d", "h", "m"))
    seconds = float(match.group("s") or 0)
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def validate_group_configs(overrides: Mapping[str, str], config: CoordinatorConfig) -> dict[str, str]:
    """The checked, normalised overrides of a group; raises :class:`ConfigError` (Kafka's INVALID_CONFIG)."""
    ranges = Ranges.of(config)
    out = {}
    for name, value in overrides.items():
        key = GROUP_KEYS.get(name)
        if key is None:
            raise ConfigError(f"Unknown group config name: {name}")
        out[name] = _normalised(key, value, ranges)
    merged = group_defaults(config) | out
    for session, heartbeat in ((CONSUMER_SESSION, CONSUMER_HEARTBEAT), (SHARE_SESSION, SHARE_HEARTBEAT)):
        if int(merged[session]) <= int(merged[heartbeat]):
            raise ConfigError(f"{session} must be greater than {heartbeat}")
    return dict(sorted(out.items()))


def core_group_config(overrides: Mapping[str, str]) -> GroupConfig | None:
    """What the coordinator acts on in a group's (checked) overrides; None when nothing."""

    def number(name: str) -> int | None:
        value = overrides.get(name)
        return None if value is None else int(value)

    config = GroupConfig(
        consumer_session_timeout_ms=number(CONSUMER_SESSION),
        consumer_heartbeat_interval_ms=number(CONSUMER_HEARTBEAT),
        consumer_assignment_interval_ms=number(CONSUMER_ASSIGNMENT),
        share_session_timeout_ms=number(SHARE_SESSION),
        share_heartbeat_interval_ms=number(SHARE_HEARTBEAT),
        share_assignment_interval_ms=number(SHARE_ASSIGNMENT),
        share_record_lock_duration_ms=number(SHARE_LOCK),
    )
    return None if config.is_empty() else config


def core_group_configs(store: GroupConfigStore) -> dict[str, GroupConfig]:
    """What the coordinator acts on, for every group with a configuration."""
    out = {}
    for group, overrides in store.items():
        config = core_group_config(overrides)
        if config is not None:
            out[group] = config
    return out


class GroupConfigStore:
    """The groups' overrides, by group id, kept in one JSON file (``{group: {name: value}}``), replaced
    atomically (fsynced when ``sync``) before a change is acknowledged."""

    def __init__(self, path: Path, config: CoordinatorConfig, *, sync: bool) -> None:
        self.path = path
        self.config = config
        self._sync = sync
        self._overrides: dict[str, dict[str, str]] = {}
        #: held by an alteration from reading the overrides until its write is done (``write``)
        self.lock = asyncio.Lock()

    def load(self) -> None:
        """Read the file (none: no group has a configuration). Damage raises :class:`CorruptLogError`."""
        self.path.with_name(self.path.name + ".tmp").unlink(missing_ok=True)
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise CorruptLogError(f"{self.path}: unreadable group configurations: {exc}") from None
        if not isinstance(raw, dict) or not all(
            isinstance(group, str) and isinstance(configs, dict) and all(isinstance(v, str) for v in configs.values())
            for group, configs in raw.items()
        ):
            raise CorruptLogError(f"{self.path}: not an object of group ids to objects of configuration values")
        loaded = {}
        for group, configs in raw.items():
            try:
                checked = validate_group_configs(configs, self.config)
            except ConfigError as exc:
                raise CorruptLogError(f"{self.path}: group {group!r}: {exc}") from None
            if checked:
                loaded[group] = checked
        self._overrides = loaded

    def overrides(self, group: str) -> dict[str, str]:
        return dict(self._overrides.get(group, {}))

    def items(self) -> Iterator[tuple[str, dict[str, str]]]:
        for group, configs in sorted(self._overrides.items()):
            yield group, dict(configs)

    def full(self, group: str) -> bool:
        """Whether a new group's configuration would pass :data:`MAX_CONFIGURED_GROUPS`."""
        return group not in self._overrides and len(self._overrides) >= MAX_CONFIGURED_GROUPS

    def write(self, group: str, configs: Mapping[str, str]) -> asyncio.Future[None]:
        """Replace a group's overrides by ``configs`` (checked already; empty removes them): the file written
        durably on a worker thread, then, in the future's first callback on the event loop, the overrides kept.
        The future fails with the write's error. Kept once written whether or not anyone still waits (the file
        and the store never disagree); the caller serialises alterations until the future is done (``lock``:
        one computed from the overrides another is still writing would lose that other's change)."""
        updated = dict(self._overrides)
        if configs:
            updated[group] = dict(configs)
        else:
            updated.pop(group, None)
        text = json.dumps(dict(sorted(updated.items())), sort_keys=True) + "\n"
        written = asyncio.get_running_loop().run_in_executor(
            None, functools.partial(write_file_atomically, self.path, text.encode("utf-8"), sync=self._sync)
        )

        def keep(done: asyncio.Future[None]) -> None:
            if not done.cancelled() and done.exception() is None:
                self._overrides = updated

        written.add_done_callback(keep)
        return written
