"""Scenario files: the bundled ones load, and every invalid input is reported as one line naming the
source and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from regroup.sim.scenario import ScenarioError, bundled_names, load, parse

MINIMAL: dict[str, Any] = {
    "duration_ms": 1000,
    "topics": {"t": 2},
    "members": [{"id": "a"}],
    "events": [{"at_ms": 0, "action": "join", "member": "a"}],
}


def with_(**changes: Any) -> str:
    doc = json.loads(json.dumps(MINIMAL))
    doc.update(changes)
    return json.dumps(doc)


def test_bundled_scenarios_load_by_name() -> None:
    assert {"third-member-joins-eager", "third-member-joins-cooperative"} <= set(bundled_names())
    eager = load("third-member-joins-eager")
    assert eager.topics == {"topic-foo": 3}
    assert [m.name for m in eager.members] == ["c0", "c1", "c2"]
    assert eager.member("c0").strategies == ("range", "cooperative-sticky")
    assert load("third-member-joins-cooperative").member("c2").strategies == ("cooperative-sticky",)


def test_defaults_and_member_defaults(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(with_(member_defaults={"session_timeout_ms": 20000, "strategies": ["sticky"]}))
    scenario = load(str(path))
    assert scenario.name == "s" and scenario.group_id == "g" and scenario.measure_from_ms == 0
    (member,) = scenario.members
    assert member.topics == ("t",) and member.strategies == ("sticky",) and member.session_timeout_ms == 20000
    assert scenario.coordinator == {"group_initial_rebalance_delay_ms": 0}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{", "x.json: invalid JSON at line 1"),
        ("[]", "x.json: : must be an object"),
        (with_(extra=1), "x.json: extra: unknown field"),
        (json.dumps({k: v for k, v in MINIMAL.items() if k != "topics"}), "x.json: topics: missing"),
        (with_(duration_ms="10"), "x.json: duration_ms: must be an integer"),
        (with_(topics={"t": 0}), "x.json: topics.t: must be >= 1"),
        (
            with_(members=[{"id": "a", "strategies": ["nope"]}]),
            "x.json: members[0].strategies: unknown strategy 'nope'",
        ),
        (with_(members=[{"id": "a", "topics": ["u"]}]), "x.json: members[0].topics: unknown topic 'u'"),
        (with_(members=[{"id": "a"}, {"id": "a"}]), "x.json: members: member ids must be unique"),
        (with_(members=[{"id": "a", "session_timeout_ms": 3000}]), "x.json: members[0].heartbeat_interval_ms"),
        (with_(members=[{"name": "a"}]), "x.json: members[0].name: unknown field"),
        (with_(events=[{"at_ms": 0, "action": "join", "member": "z"}]), "x.json: events[0].member: unknown member"),
        (with_(events=[{"at_ms": 0, "action": "dance", "member": "a"}]), "x.json: events[0].action: must be one of"),
        (with_(events=[{"at_ms": 5000, "action": "join", "member": "a"}]), "x.json: events[0].at_ms: after the end"),
        (with_(events=[{"at_ms": 0, "action": "crash"}]), "x.json: events[0].member: missing"),
        (with_(events=[{"at_ms": 0, "action": "network"}]), "x.json: events[0]: a network event changes"),
        (with_(events=[{"at_ms": 0, "action": "network", "loss": 2}]), "x.json: events[0].loss: must be a number"),
        (with_(events=[{"at_ms": 0, "action": "partitions", "topic": "t", "count": 1}]), "events[0].count: a topic's"),
        (with_(coordinator={"delay": 1}), "x.json: coordinator.delay: unknown field"),
        (with_(network={"jitter_ms": -1}), "x.json: network.jitter_ms: must be >= 0"),
    ],
)
def test_invalid_scenarios_name_the_field(doc: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse(doc, "x.json")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_unreadable_or_unknown_sources(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"missing\.json: cannot read"):
        load(str(tmp_path / "missing.json"))
    with pytest.raises(ScenarioError, match="no-such-scenario: no such file or bundled scenario"):
        load("no-such-scenario")
