"""Scenario grids: a YAML or JSON document whose list-valued fields are axes; the grid is their Cartesian
product, one simulator run per combination (``expand``). Every error names the file and the field
(``quick.yaml: strategies[1]: unknown strategy 'stiky'``). The format is documented in docs/lab.md.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import yaml

from regroup.assignors import registry
from regroup.lab import protocols
from regroup.lab.errors import LabInputError
from regroup.sim.appspec import APP_FIELDS, read_app

SUBSCRIPTIONS = ("all", "one", "staggered")
CHURN = ("none", "join", "leave", "crash", "rolling")
#: Patterns that take members out of the group: they need more members than events.
SHRINKING = frozenset({"leave", "crash"})
AXES = ("members", "topics", "partitions", "subscriptions", "churn", "strategies", "protocols", "seeds")


@dataclass(frozen=True, slots=True)
class Churn:
    pattern: str
    events: int

    @property
    def label(self) -> str:
        return self.pattern if self.pattern == "none" else f"{self.pattern}x{self.events}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """What every run of a grid shares (not an axis)."""

    warmup_ms: int = 10_000
    interval_ms: int = 10_000
    tail_ms: int = 20_000
    # classic members: Kafka's session.timeout.ms and heartbeat.interval.ms defaults (KIP-735: 45 s since
    # Kafka 3.0; librdkafka's too), so a crash costs the same detection time under both protocols
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    rebalance_timeout_ms: int = 30_000
    # KIP-848 groups: the coordinator's settings (Kafka's group.consumer.session.timeout.ms and
    # group.consumer.heartbeat.interval.ms, at Kafka's defaults)
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    #: KIP-1263's group.consumer.assignment.interval.ms (0: a target per epoch bump, as Kafka 4.2; 4.3's is 1000)
    consumer_assignment_interval_ms: int = 0
    auto_commit: bool = False
    latency_ms: int = 5
    jitter_ms: int = 0
    metadata_bytes: int | None = None
    #: share runs (protocol ``share``): records in each partition at the start, and records produced per second
    #: per partition (None: derived from the workload, ``scenarios.share_rate_per_s``)
    share_backlog: int = 0
    share_rate_per_s: int | None = None
    #: the members' application model (``max_poll_records``, ``processing_ms``, ...: docs/simulator.md), as
    #: canonical JSON of the fields the grid set ("" = the defaults); a string keeps the settings hashable
    app_json: str = ""

    def app_fields(self) -> dict[str, Any]:
        """The members' application-model fields, as scenario member fields: what the grid set, over the lab's
        own default of no commit in the revocation callbacks (like ``auto_commit``: each commit costs
        simulation time, about 30 % of a run on the benchmark grid, and adds one round trip to a revocation)."""
        return {"commit_on_revoke": False, **(json.loads(self.app_json) if self.app_json else {})}

    def to_json(self) -> dict[str, Any]:
        """Every setting by name (what the report's model section shows)."""
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    """One simulator run: one value of every axis, plus the grid's settings."""

    grid: str
    members: int
    topics: int
    partitions: int
    subscription: str
    churn: str
    churn_events: int
    strategy: str
    protocol: str
    seed: int
    settings: Settings = field(default_factory=Settings)

    @property
    def run_id(self) -> str:
        churn = self.churn if self.churn == "none" else f"{self.churn}x{self.churn_events}"
        return (
            f"{self.grid}/m{self.members}-t{self.topics}-p{self.partitions}-{self.subscription}-{churn}"
            f"-{self.strategy}-{self.protocol}-s{self.seed}"
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(doc: dict[str, Any]) -> RunSpec:
        return RunSpec(**{**doc, "settings": Settings(**doc["settings"])})


@dataclass(frozen=True, slots=True, kw_only=True)
class Grid:
    name: str
    members: tuple[int, ...]
    topics: tuple[int, ...]
    partitions: tuple[int, ...]
    subscriptions: tuple[str, ...]
    churn: tuple[Churn, ...]
    strategies: tuple[str, ...]
    protocols: tuple[str, ...]
    seeds: tuple[int, ...]
    settings: Settings = field(default_factory=Settings)

    def describe_axes(self) -> dict[str, Any]:
        """The axes in words and numbers, for the report."""
        seeds = self.seeds if len(self.seeds) <= 5 else f"{len(self.seeds)} ({self.seeds[0]}..{self.seeds[-1]})"
        return {
            "group sizes": list(self.members),
            "topics": list(self.topics),
            "partitions per topic": list(self.partitions),
            "subscriptions": list(self.subscriptions),
            "churn": [c.label for c in self.churn],
            "strategies": list(self.strategies),
            "protocols": list(self.protocols),
            "seeds": list(seeds) if isinstance(seeds, tuple) else seeds,
        }

    def combinations(self) -> int:
        """Size of the product, including (strategy, protocol) pairs that cannot run."""
        return math.prod(len(getattr(self, axis)) for axis in AXES)

    def seed_note(self) -> str | None:
        """A note when the grid lists several seeds but nothing random happens in a run: the seed drives
        only the network's jitter, so with ``jitter_ms`` 0 every seed simulates the same run."""
        fields = self.settings.app_fields()
        app = read_app(fields, "settings", lambda where, what: LabInputError(f"{where}: {what}"))
        if len(self.seeds) > 1 and self.settings.jitter_ms == 0 and not app.random():
            return (
                f"{len(self.seeds)} seeds with jitter_ms 0, aligned heartbeats and a fixed processing time: nothing "
                "in a run is random, so every seed gives the same run (set settings.jitter_ms to vary runs by seed)"
            )
        return None

    def skipped_pairs(self) -> list[tuple[str, str]]:
        """(strategy, protocol) pairs of the grid that cannot run (e.g. ``range`` is never cooperative, ``uniform``
        never classic), or run another listed pair again (``range`` and ``server-range`` under ``consumer``)."""
        return [pair for pair, reason in self.skipped() if reason]

    def skipped(self) -> list[tuple[tuple[str, str], str]]:
        """Every (strategy, protocol) pair with why it does not run ("" when it runs)."""
        out: list[tuple[tuple[str, str], str]] = []
        taken: dict[tuple[str, str], str] = {}
        for s in self.strategies:
            for p in self.protocols:
                if protocols.member_settings(p, s) is None:
                    out.append(((s, p), "cannot run"))
                    continue
                name = protocols.strategy_name(p, s)
                if (name, p) in taken:
                    out.append(((s, p), f"same as {taken[(name, p)]}/{p}"))
                    continue
                taken[(name, p)] = s
                out.append(((s, p), ""))
        return out


def expand(grid: Grid) -> list[RunSpec]:
    """Every runnable combination, in a fixed order (axes in ``AXES`` order, values as listed)."""
    skipped = set(grid.skipped_pairs())
    return [
        RunSpec(
            grid=grid.name,
            members=m,
            topics=t,
            partitions=p,
            subscription=sub,
            churn=churn.pattern,
            churn_events=churn.events,
            strategy=protocols.strategy_name(protocol, strategy),
            protocol=protocol,
            seed=seed,
            settings=grid.settings,
        )
        for m, t, p, sub, churn, strategy, protocol, seed in product(
            grid.members,
            grid.topics,
            grid.partitions,
            grid.subscriptions,
            grid.churn,
            grid.strategies,
            grid.protocols,
            grid.seeds,
        )
        if (strategy, protocol) not in skipped
    ]


# ----------------------------------------------------------------------------------------------- loading
def load(path: str) -> Grid:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise LabInputError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise LabInputError(f"{path}: cannot read: not UTF-8 text") from None
    return parse(text, path)


def parse(text: str, source: str = "<grid>") -> Grid:
    if source.endswith(".json"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LabInputError(f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    else:
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or "not valid YAML"
            raise LabInputError(f"{source}: invalid YAML{where}: {problem}") from None
    return _Reader(source).grid(doc)


_TOP = ("name", "description", *AXES, "settings")


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, message: str) -> LabInputError:
        return LabInputError(f"{self.source}: {where}: {message}")

    def int_(self, value: Any, where: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(where, "must be an integer")
        if value < minimum:
            raise self.fail(where, f"must be >= {minimum}")
        return value

    def items(self, doc: dict[str, Any], key: str) -> list[Any]:
        if key not in doc:
            raise self.fail(key, "missing")
        value = doc[key]
        if not isinstance(value, list):
            value = [value]
        if not value:
            raise self.fail(key, "must not be empty")
        return value

    def ints(self, doc: dict[str, Any], key: str, minimum: int) -> tuple[int, ...]:
        values = tuple(self.int_(v, f"{key}[{i}]", minimum) for i, v in enumerate(self.items(doc, key)))
        return self.unique(values, key)

    def names(self, doc: dict[str, Any], key: str, allowed: tuple[str, ...] | None) -> tuple[str, ...]:
        out: list[str] = []
        for i, v in enumerate(self.items(doc, key)):
            if not isinstance(v, str) or not v:
                raise self.fail(f"{key}[{i}]", "must be a non-empty string")
            if allowed is not None and v not in allowed:
                raise self.fail(f"{key}[{i}]", f"unknown value {v!r} (known: {', '.join(allowed)})")
            out.append(v)
        return self.unique(tuple(out), key)

    def unique(self, values: tuple[Any, ...], key: str) -> tuple[Any, ...]:
        if len(set(values)) != len(values):
            raise self.fail(key, "must not repeat a value")
        return values

    def grid(self, doc: Any) -> Grid:
        if not isinstance(doc, dict):
            raise self.fail("grid", "must be a mapping of fields")
        for key in doc:
            if key not in _TOP:
                raise self.fail(str(key), f"unknown field (known: {', '.join(_TOP)})")
        name = doc.get("name", Path(self.source).stem)
        if not isinstance(name, str) or not name or "/" in name:
            raise self.fail("name", "must be a non-empty string without '/'")
        strategies = self.names(doc, "strategies", tuple(registry.available()))
        protocol_names = self.names(doc, "protocols", None)
        for i, p in enumerate(protocol_names):
            if not protocols.is_supported(p):
                raise self.fail(
                    f"protocols[{i}]",
                    f"protocol {p!r} is not supported by the simulator (supported: {', '.join(protocols.supported())})",
                )
        seeds_doc = doc.get("seeds", [0])
        if isinstance(seeds_doc, dict):
            if set(seeds_doc) != {"count"}:
                raise self.fail("seeds", "must be a list of integers or {count: N}")
            seeds = tuple(range(self.int_(seeds_doc["count"], "seeds.count", 1)))
        else:
            seeds = self.ints({"seeds": seeds_doc}, "seeds", 0)
        grid = Grid(
            name=name,
            members=self.ints(doc, "members", 1),
            topics=self.ints(doc, "topics", 1),
            partitions=self.ints(doc, "partitions", 1),
            subscriptions=self.names(
                {"subscriptions": doc.get("subscriptions", ["all"])}, "subscriptions", SUBSCRIPTIONS
            ),
            churn=self.churns(doc.get("churn", ["none"])),
            strategies=strategies,
            protocols=protocol_names,
            seeds=seeds,
            settings=self.settings(doc.get("settings", {})),
        )
        self.check(grid)
        return grid

    def churns(self, value: Any) -> tuple[Churn, ...]:
        items = self.items({"churn": value}, "churn")
        out: list[Churn] = []
        for i, item in enumerate(items):
            where = f"churn[{i}]"
            if isinstance(item, str):
                item = {"pattern": item}
            if not isinstance(item, dict):
                raise self.fail(where, "must be a pattern name or {pattern: NAME, events: N}")
            for key in item:
                if key not in ("pattern", "events"):
                    raise self.fail(f"{where}.{key}", "unknown field (known: pattern, events)")
            pattern = item.get("pattern")
            if pattern not in CHURN:
                raise self.fail(f"{where}.pattern", f"unknown pattern {pattern!r} (known: {', '.join(CHURN)})")
            events = 0 if pattern == "none" else self.int_(item.get("events", 1), f"{where}.events", 1)
            if pattern == "none" and item.get("events", 0) not in (0, None):
                raise self.fail(f"{where}.events", "pattern 'none' has no events")
            out.append(Churn(pattern, events))
        return self.unique(tuple(out), "churn")

    def settings(self, value: Any) -> Settings:
        if not isinstance(value, dict):
            raise self.fail("settings", "must be a mapping")
        known = [name for name in Settings.__dataclass_fields__ if name != "app_json"] + list(APP_FIELDS)
        out: dict[str, Any] = {}
        app = {key: v for key, v in value.items() if key in APP_FIELDS}
        if app:
            read_app(app, "settings", self.fail)  # checks every field; the scenario reads them again
            out["app_json"] = json.dumps(app, sort_keys=True)
        for key, v in value.items():
            where = f"settings.{key}"
            if key in APP_FIELDS:
                continue
            if key not in known:
                raise self.fail(where, f"unknown field (known: {', '.join(known)})")
            if key == "auto_commit":
                if not isinstance(v, bool):
                    raise self.fail(where, "must be true or false")
                out[key] = v
            elif key in ("metadata_bytes", "share_rate_per_s") and v is None:
                out[key] = None
            else:
                zero_ok = ("jitter_ms", "warmup_ms", "share_backlog", "consumer_assignment_interval_ms")
                out[key] = self.int_(v, where, 0 if key in zero_ok else 1)
        settings = Settings(**out)
        if settings.heartbeat_interval_ms >= settings.session_timeout_ms:
            raise self.fail("settings.heartbeat_interval_ms", "must be lower than session_timeout_ms")
        if settings.consumer_heartbeat_interval_ms >= settings.consumer_session_timeout_ms:
            raise self.fail("settings.consumer_heartbeat_interval_ms", "must be lower than consumer_session_timeout_ms")
        return settings

    def check(self, grid: Grid) -> None:
        for i, churn in enumerate(grid.churn):
            smallest = min(grid.members)
            if churn.pattern in SHRINKING and churn.events >= smallest:
                raise self.fail(
                    f"churn[{i}].events",
                    f"{churn.pattern} with {churn.events} events needs more members than events (members: {smallest})",
                )
        for i, topics in enumerate(grid.topics):
            if "one" in grid.subscriptions and topics > min(grid.members):
                raise self.fail(
                    f"topics[{i}]",
                    f"subscription 'one' with {topics} topics leaves a topic without members"
                    f" (members: {min(grid.members)})",
                )
        if not expand(grid):
            pairs = ", ".join(f"{s}/{p}" for s, p in grid.skipped_pairs())
            raise self.fail("protocols", f"no strategy runs under any listed protocol ({pairs})")
