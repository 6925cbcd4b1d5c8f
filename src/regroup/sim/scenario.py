"""Scenario files: what the simulator runs. JSON, validated field by field; every error names the file
and the field (``seed.json: events[2].member: unknown member 'c9'``). The format is documented in
docs/simulator.md; bundled scenarios live in ``regroup/sim/scenarios/<name>.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any, Final

from regroup.assignors import registry
from regroup.client.app import DEFAULT_APP, AppModel
from regroup.client.config import SERVER_ASSIGNOR_NAMES, ConfigError, rebalance_protocol
from regroup.coordinator.config import MIGRATION_POLICIES, CoordinatorConfig
from regroup.sim.appspec import APP_FIELDS, read_app

ACTIONS = ("join", "leave", "crash", "restart", "bounce", "isolate", "heal", "network", "partitions")
MEMBER_ACTIONS = frozenset({"join", "leave", "crash", "restart", "bounce", "isolate", "heal"})
#: actions that start a process, and may switch the member's protocol for it (and later ones)
START_ACTIONS = frozenset({"join", "restart", "bounce"})
COORDINATOR_FIELDS = tuple(f.name for f in fields(CoordinatorConfig))
#: the protocols a start action may switch a member to: ``classic`` (eager or cooperative, as the strategies say)
#: or ``consumer`` (KIP-848)
PROTOCOLS = ("classic", "consumer")
#: a member's protocol: one of ``PROTOCOLS``, or ``share`` (a KIP-932 share consumer, in the scenario's share group;
#: a share member stays one)
MEMBER_PROTOCOLS = (*PROTOCOLS, "share")
#: where a share partition starts when it is first assigned (``share.auto.offset.reset``)
SHARE_RESETS = ("earliest", "latest")
#: the longest scenario id a share member may have (its member id, ``<id>-<incarnation>``, has at most 36 characters)
SHARE_MEMBER_NAME_MAX = 30


class ScenarioError(ValueError):
    """A scenario that cannot be read or is invalid; the message names the source and the field."""


# LinkSpec, ScenarioEvent and Scenario are built for every run: they are not frozen (a frozen dataclass costs
# about 10k instructions per object in the compiled build; docs/architecture.md). ``Final`` fields keep them
# immutable for mypy; ``unsafe_hash`` keeps the field-based hash a frozen dataclass has.


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class LinkSpec:
    """Conditions of a member <-> coordinator link: one-way latency (fixed + uniform jitter), loss and
    duplication probabilities per message."""

    latency_ms: Final[int] = 5
    jitter_ms: Final[int] = 0
    loss: Final[float] = 0.0
    duplicate: Final[float] = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberSpec:
    name: str
    topics: tuple[str, ...]
    strategies: tuple[str, ...] = ("range", "cooperative-sticky")
    group_instance_id: str | None = None
    rack: str | None = None
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    rebalance_timeout_ms: int = 30_000
    request_timeout_ms: int = 5_000
    auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    protocol: str = "classic"
    assignor: str | None = None  # KIP-848 members: the server-side assignor they ask for
    callback_delay_ms: int = 0  # KIP-848 members: time until the rebalance callbacks of an assignment run
    app: AppModel = DEFAULT_APP  # the application around the member (client.app)
    fetch_max_wait_ms: int = 500  # share members: how long a ShareFetch that finds nothing waits
    release_fraction: float = 0.0  # share members: records whose processing fails and that are released
    reject_fraction: float = 0.0  # share members: records whose processing fails for good (rejected)

    @property
    def draws_needed(self) -> bool:
        """Whether the member's processes draw random numbers (their application, or failed records)."""
        failing = self.protocol == "share" and (self.release_fraction > 0 or self.reject_fraction > 0)
        return self.app.random() or failing


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class ScenarioEvent:
    at_ms: Final[int]
    action: Final[str]
    member: Final[str | None] = None  # member actions; for ``network``: one link (None = every link)
    topic: Final[str | None] = None  # ``partitions``
    count: Final[int | None] = None  # ``partitions``
    link: Final[dict[str, float]] = field(default_factory=dict)  # ``network``: the LinkSpec fields to change
    protocol: Final[str | None] = None  # ``join``/``restart``/``bounce``: switch the member to this protocol


#: the network of a scenario that gives none (LinkSpec is immutable: one shared instance)
DEFAULT_NETWORK: Final = LinkSpec()


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class ShareSpec:
    """The share group of a scenario's share members and the log they read (docs/simulator.md, "Share
    members"): every partition of every topic holds ``backlog`` records at the start (partitions added later
    start empty) and gets ``rate_per_s`` more per second from ``produce_from_ms`` (or its creation) until
    ``produce_until_ms`` (None: the end of the run)."""

    group_id: Final[str | None] = None  # None: the scenario's group id
    auto_offset_reset: Final[str] = "earliest"
    backlog: Final[int] = 0
    rate_per_s: Final[int] = 0
    produce_from_ms: Final[int] = 0
    produce_until_ms: Final[int | None] = None
    #: a crashed process's connection closes, and the broker releases what it held at once (else: locks lapse)
    crash_disconnects: Final[bool] = True
    #: the run ends quietly: every record must be acknowledged or archived by the end (a check)
    expect_drained: Final[bool] = False


#: the share settings of a scenario that gives none (immutable: one shared instance)
DEFAULT_SHARE: Final = ShareSpec()


def default_coordinator() -> dict[str, Any]:
    """The coordinator settings of a scenario that gives none: no initial rebalance delay."""
    return {"group_initial_rebalance_delay_ms": 0}


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class Scenario:
    name: Final[str]
    description: Final[str] = ""
    group_id: Final[str] = "g"
    duration_ms: Final[int]
    measure_from_ms: Final[int] = 0
    topics: Final[dict[str, int]]
    members: Final[tuple[MemberSpec, ...]]
    events: Final[tuple[ScenarioEvent, ...]]
    network: Final[LinkSpec] = DEFAULT_NETWORK
    coordinator: Final[dict[str, Any]] = field(default_factory=default_coordinator)
    share: Final[ShareSpec] = DEFAULT_SHARE

    def member(self, name: str) -> MemberSpec:
        return next(m for m in self.members if m.name == name)

    @property
    def share_group_id(self) -> str:
        """The group the share members are in."""
        return self.share.group_id or self.group_id

    @property
    def has_share_members(self) -> bool:
        return any(m.protocol == "share" for m in self.members)

    def coordinator_config(self) -> CoordinatorConfig:
        settings: dict[str, Any] = dict(self.coordinator)
        return CoordinatorConfig(**settings)


# ----------------------------------------------------------------------------------------------- loading
#: Earlier names of bundled scenarios, still accepted so that existing command lines keep working.
ALIASES = {
    "seed-004-eager": "third-member-joins-eager",
    "seed-004-cooperative": "third-member-joins-cooperative",
    "seed-004-consumer": "third-member-joins-consumer",
}


def bundled_names() -> list[str]:
    folder = resources.files("regroup.sim") / "scenarios"
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


def load(source: str) -> Scenario:
    """A scenario from a file path, or a bundled scenario by name (or by an earlier name, ``ALIASES``)."""
    path = Path(source)
    if path.exists() or source.endswith(".json") or "/" in source:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ScenarioError(f"{source}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ScenarioError(f"{source}: cannot read: not UTF-8 text") from None
        return parse(text, source)
    source = ALIASES.get(source, source)
    if source in bundled_names():
        text = (resources.files("regroup.sim") / "scenarios" / f"{source}.json").read_text(encoding="utf-8")
        return parse(text, source)
    raise ScenarioError(f"{source}: no such file or bundled scenario (bundled: {', '.join(bundled_names())})")


def parse(text: str, source: str = "<scenario>") -> Scenario:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    return _Reader(source).scenario(doc)


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, message: str) -> ScenarioError:
        return ScenarioError(f"{self.source}: {where}: {message}")

    def obj(self, value: Any, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, "must be an object")
        for key in value:
            if key not in allowed:
                raise self.fail(f"{where}.{key}" if where else key, "unknown field")
        return value

    def int_(self, value: Any, where: str, *, minimum: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(where, "must be an integer")
        if value < minimum:
            raise self.fail(where, f"must be >= {minimum}")
        return value

    def prob(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
            raise self.fail(where, "must be a number between 0 and 1")
        return float(value)

    def str_(self, value: Any, where: str, *, nullable: bool = False) -> str | None:
        if value is None and nullable:
            return None
        if not isinstance(value, str) or not value:
            raise self.fail(where, "must be a non-empty string")
        return value

    def strs(self, value: Any, where: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise self.fail(where, "must be a non-empty list of strings")
        if len(set(value)) != len(value):
            raise self.fail(where, "must not repeat")
        return tuple(value)

    def link(self, value: Any, where: str, base: LinkSpec) -> LinkSpec:
        doc = self.obj(value, where, tuple(f.name for f in fields(LinkSpec)))
        out = {f.name: getattr(base, f.name) for f in fields(LinkSpec)}
        for key in ("latency_ms", "jitter_ms"):
            if key in doc:
                out[key] = self.int_(doc[key], f"{where}.{key}")
        for key in ("loss", "duplicate"):
            if key in doc:
                out[key] = self.prob(doc[key], f"{where}.{key}")
        return LinkSpec(**out)

    def scenario(self, doc: Any) -> Scenario:
        allowed = (
            "name",
            "description",
            "group_id",
            "duration_ms",
            "measure_from_ms",
            "coordinator",
            "network",
            "topics",
            "member_defaults",
            "members",
            "events",
            "share",
        )
        doc = self.obj(doc, "", allowed)
        for required in ("duration_ms", "topics", "members", "events"):
            if required not in doc:
                raise self.fail(required, "missing")
        name = self.str_(doc.get("name", Path(self.source).stem), "name") or ""
        duration = self.int_(doc["duration_ms"], "duration_ms", minimum=1)
        measure = self.int_(doc.get("measure_from_ms", 0), "measure_from_ms")
        topics_doc = doc["topics"]
        if not isinstance(topics_doc, dict) or not topics_doc:
            raise self.fail("topics", "must be a non-empty object of topic -> partition count")
        topics = {str(t): self.int_(n, f"topics.{t}", minimum=1) for t, n in topics_doc.items()}
        coordinator = self.obj(doc.get("coordinator", {}), "coordinator", COORDINATOR_FIELDS)
        coordinator_cfg: dict[str, Any] = {"group_initial_rebalance_delay_ms": 0}
        coordinator_cfg.update({k: self.coordinator_value(k, v) for k, v in coordinator.items()})
        defaults = self.obj(doc.get("member_defaults", {}), "member_defaults", _MEMBER_FIELDS[1:])
        members_doc = doc["members"]
        if not isinstance(members_doc, list) or not members_doc:
            raise self.fail("members", "must be a non-empty list")
        members = tuple(self.member(m, f"members[{i}]", defaults, topics) for i, m in enumerate(members_doc))
        names = [m.name for m in members]
        if len(set(names)) != len(names):
            raise self.fail("members", "member ids must be unique")
        group_id = self.str_(doc.get("group_id", "g"), "group_id") or "g"
        share = self.share(doc.get("share", {}))
        if (share.group_id or group_id) == group_id and {m.protocol == "share" for m in members} == {True, False}:
            raise self.fail("share.group_id", "share members need a group of their own beside the consumer group")
        events_doc = doc["events"]
        if not isinstance(events_doc, list):
            raise self.fail("events", "must be a list")
        share_names = {m.name for m in members if m.protocol == "share"}
        events = tuple(
            self.event(e, f"events[{i}]", set(names), topics, duration, share_names) for i, e in enumerate(events_doc)
        )
        counts = dict(topics)
        for i in sorted(range(len(events)), key=lambda i: events[i].at_ms):
            event = events[i]
            if event.action == "partitions" and event.topic is not None and event.count is not None:
                if event.count < counts[event.topic]:
                    raise self.fail(f"events[{i}].count", "a topic's partition count can only grow")
                counts[event.topic] = event.count
        return Scenario(
            name=name,
            description=str(doc.get("description", "")),
            group_id=group_id,
            duration_ms=duration,
            measure_from_ms=measure,
            topics=topics,
            members=members,
            events=tuple(sorted(events, key=lambda e: e.at_ms)),
            network=self.link(doc.get("network", {}), "network", LinkSpec()),
            coordinator=coordinator_cfg,
            share=share,
        )

    def share(self, value: Any) -> ShareSpec:
        doc = self.obj(value, "share", tuple(f.name for f in fields(ShareSpec)))
        out: dict[str, Any] = {}
        if "group_id" in doc:
            out["group_id"] = self.str_(doc["group_id"], "share.group_id")
        if "auto_offset_reset" in doc:
            if doc["auto_offset_reset"] not in SHARE_RESETS:
                raise self.fail("share.auto_offset_reset", f"must be one of {', '.join(SHARE_RESETS)}")
            out["auto_offset_reset"] = doc["auto_offset_reset"]
        for key in ("backlog", "rate_per_s", "produce_from_ms"):
            if key in doc:
                out[key] = self.int_(doc[key], f"share.{key}")
        if doc.get("produce_until_ms") is not None:
            out["produce_until_ms"] = self.int_(doc["produce_until_ms"], "share.produce_until_ms")
        for key in ("crash_disconnects", "expect_drained"):
            if key in doc:
                if not isinstance(doc[key], bool):
                    raise self.fail(f"share.{key}", "must be true or false")
                out[key] = doc[key]
        spec = ShareSpec(**out)
        if spec.produce_until_ms is not None and spec.produce_until_ms < spec.produce_from_ms:
            raise self.fail("share.produce_until_ms", "must not be before produce_from_ms")
        return spec

    def coordinator_value(self, key: str, value: Any) -> Any:
        where = f"coordinator.{key}"
        if key == "consumer_group_migration_policy":
            if value not in MIGRATION_POLICIES:
                raise self.fail(where, f"must be one of {', '.join(MIGRATION_POLICIES)}")
            return value
        if key == "consumer_group_assignors":
            names = self.strs(value, where)
            wire = tuple(self.server_assignor(name, where) for name in names)
            if len(set(wire)) != len(wire):
                raise self.fail(where, "must not repeat")
            return wire
        return self.int_(value, where)

    def server_assignor(self, name: str, where: str) -> str:
        """A KIP-848 server-side assignor by regroup's name (``uniform``, ``server-range``) or Kafka's (``range``),
        as the name members send and the coordinator knows."""
        ours = registry.server_side_name(name)
        if ours is None or registry.wire_name(ours) not in SERVER_ASSIGNOR_NAMES:
            known = ", ".join(registry.SERVER_SIDE)
            raise self.fail(where, f"unknown server-side assignor {name!r} (known: {known}; range = server-range)")
        return registry.wire_name(ours)

    def protocol(self, value: Any, where: str, allowed: tuple[str, ...] = PROTOCOLS) -> str:
        if value not in allowed:
            raise self.fail(where, f"must be one of {', '.join(allowed)}")
        return str(value)

    def member(self, value: Any, where: str, defaults: dict[str, Any], topics: dict[str, int]) -> MemberSpec:
        doc = dict(defaults)
        doc.update(self.obj(value, where, _MEMBER_FIELDS))
        if "id" not in doc:
            raise self.fail(f"{where}.id", "missing")
        out: dict[str, Any] = {"name": self.str_(doc["id"], f"{where}.id")}
        out["topics"] = self.strs(doc["topics"], f"{where}.topics") if "topics" in doc else tuple(sorted(topics))
        for topic in out["topics"]:
            if topic not in topics:
                raise self.fail(f"{where}.topics", f"unknown topic {topic!r}")
        if "strategies" in doc:
            out["strategies"] = self.strs(doc["strategies"], f"{where}.strategies")
            for strategy in out["strategies"]:
                if strategy not in registry.available():
                    raise self.fail(f"{where}.strategies", f"unknown strategy {strategy!r}")
                if registry.get(strategy).server_side:
                    raise self.fail(
                        f"{where}.strategies",
                        f"{strategy!r} is a KIP-848 server-side assignor, which classic members cannot use"
                        f' (for KIP-848 members: "protocol": "consumer", "assignor": "{strategy}")',
                    )
            try:
                rebalance_protocol(out["strategies"])
            except ConfigError as exc:
                raise self.fail(f"{where}.strategies", str(exc)) from None
        for key in ("group_instance_id", "rack"):
            if key in doc:
                out[key] = self.str_(doc[key], f"{where}.{key}", nullable=True)
        for key in _MEMBER_INTS:
            if key in doc:
                out[key] = self.int_(doc[key], f"{where}.{key}", minimum=1)
        if "protocol" in doc:
            out["protocol"] = self.protocol(doc["protocol"], f"{where}.protocol", MEMBER_PROTOCOLS)
        if "assignor" in doc:
            assignor = self.str_(doc["assignor"], f"{where}.assignor", nullable=True)
            out["assignor"] = None if assignor is None else self.server_assignor(assignor, f"{where}.assignor")
        if "callback_delay_ms" in doc:
            out["callback_delay_ms"] = self.int_(doc["callback_delay_ms"], f"{where}.callback_delay_ms")
        if "auto_commit" in doc:
            if not isinstance(doc["auto_commit"], bool):
                raise self.fail(f"{where}.auto_commit", "must be true or false")
            out["auto_commit"] = doc["auto_commit"]
        out["app"] = read_app(doc, where, self.fail)
        if "fetch_max_wait_ms" in doc:
            out["fetch_max_wait_ms"] = self.int_(doc["fetch_max_wait_ms"], f"{where}.fetch_max_wait_ms")
        for key in ("release_fraction", "reject_fraction"):
            if key in doc:
                out[key] = self.prob(doc[key], f"{where}.{key}")
        spec = MemberSpec(**out)
        if spec.protocol == "share":
            self.share_member(spec, where)
        if spec.heartbeat_interval_ms >= spec.session_timeout_ms:
            raise self.fail(f"{where}.heartbeat_interval_ms", "must be lower than session_timeout_ms")
        if spec.callback_delay_ms >= spec.rebalance_timeout_ms:
            raise self.fail(f"{where}.callback_delay_ms", "must be lower than rebalance_timeout_ms")
        return spec

    def share_member(self, spec: MemberSpec, where: str) -> None:
        """What a share member cannot have."""
        if len(spec.name) > SHARE_MEMBER_NAME_MAX:
            raise self.fail(f"{where}.id", f"a share member's id has at most {SHARE_MEMBER_NAME_MAX} characters")
        if spec.group_instance_id is not None:
            raise self.fail(f"{where}.group_instance_id", "share groups have no static members")
        if spec.release_fraction + spec.reject_fraction > 1.0:
            raise self.fail(f"{where}.reject_fraction", "release_fraction + reject_fraction must be at most 1")

    def event(
        self,
        value: Any,
        where: str,
        names: set[str],
        topics: dict[str, int],
        duration: int,
        share_names: set[str] | frozenset[str] = frozenset(),
    ) -> ScenarioEvent:
        link_fields = tuple(f.name for f in fields(LinkSpec))
        doc = self.obj(value, where, ("at_ms", "action", "member", "topic", "count", "protocol", *link_fields))
        if "at_ms" not in doc:
            raise self.fail(f"{where}.at_ms", "missing")
        at = self.int_(doc["at_ms"], f"{where}.at_ms")
        if at > duration:
            raise self.fail(f"{where}.at_ms", f"after the end of the scenario ({duration} ms)")
        action = doc.get("action")
        if action not in ACTIONS:
            raise self.fail(f"{where}.action", f"must be one of {', '.join(ACTIONS)}")
        if action in MEMBER_ACTIONS and doc.get("member") is None:
            raise self.fail(f"{where}.member", "missing")
        member = self.str_(doc.get("member"), f"{where}.member", nullable=True)
        if member is not None and member not in names:
            raise self.fail(f"{where}.member", f"unknown member {member!r}")
        topic, count = None, None
        if action == "partitions":
            topic = self.str_(doc.get("topic"), f"{where}.topic")
            if topic not in topics:
                raise self.fail(f"{where}.topic", f"unknown topic {topic!r}")
            count = self.int_(doc.get("count"), f"{where}.count", minimum=1)
        link: dict[str, float] = {}
        if action == "network":
            changes = {k: doc[k] for k in link_fields if k in doc}
            if not changes:
                raise self.fail(where, f"a network event changes at least one of {', '.join(link_fields)}")
            checked = self.link(changes, where, LinkSpec())
            link = {k: float(getattr(checked, k)) for k in changes}
        protocol = None
        if "protocol" in doc:
            if action not in START_ACTIONS:
                raise self.fail(f"{where}.protocol", f"only {', '.join(sorted(START_ACTIONS))} switch protocols")
            protocol = self.protocol(doc["protocol"], f"{where}.protocol")
            if member in share_names:
                raise self.fail(f"{where}.protocol", "a share member stays a share member")
        return ScenarioEvent(
            at_ms=at, action=action, member=member, topic=topic, count=count, link=link, protocol=protocol
        )


_MEMBER_INTS = (
    "session_timeout_ms",
    "heartbeat_interval_ms",
    "rebalance_timeout_ms",
    "request_timeout_ms",
    "auto_commit_interval_ms",
)
_MEMBER_FIELDS = (
    "id",
    "topics",
    "strategies",
    "group_instance_id",
    "rack",
    "auto_commit",
    "protocol",
    "assignor",
    "callback_delay_ms",
    "fetch_max_wait_ms",
    "release_fraction",
    "reject_fraction",
    *_MEMBER_INTS,
    *APP_FIELDS,
)
