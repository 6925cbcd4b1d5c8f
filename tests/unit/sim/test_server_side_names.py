"""KIP-848's server-side assignors have one name everywhere (``uniform``, ``server-range``; Kafka's ``range`` is
accepted where only a server-side assignor can be meant) and no classic protocol: a classic member naming one is
a one-line scenario error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from regroup.assignors import registry
from regroup.cli.main import _build_parser
from regroup.cli.serve import ServeError, _coordinator_config
from regroup.sim import ScenarioError, parse, simulate

BASE = {
    "duration_ms": 8000,
    "topics": {"t": 4},
    "members": [{"id": "a"}, {"id": "b"}],
    "events": [{"at_ms": 0, "action": "join", "member": "a"}, {"at_ms": 0, "action": "join", "member": "b"}],
}


def scenario(**changes: object) -> str:
    return json.dumps({**BASE, **changes})


def test_the_names() -> None:
    assert registry.server_side_name("server-range") == registry.server_side_name("range") == "server-range"
    assert registry.server_side_name("uniform") == "uniform"
    assert registry.server_side_name("sticky") is None and registry.server_side_name("roundrobin") is None
    assert registry.wire_name("server-range") == registry.wire_name("range") == "range"
    assert {"uniform", "server-range"} <= set(registry.available())
    for name in ("uniform", "server-range"):  # (optimal and consistent-hash serve both sides)
        assert registry.get(name).server_side
    assert registry.server_side_name("optimal") == "optimal"


@pytest.mark.parametrize("strategy", ["uniform", "server-range"])
def test_a_classic_member_cannot_use_a_server_side_assignor(tmp_path: Path, strategy: str) -> None:
    doc = scenario(member_defaults={"strategies": [strategy]})
    with pytest.raises(ScenarioError) as info:
        parse(doc, "x.json")
    message = str(info.value)
    assert message.startswith(f"x.json: members[0].strategies: {strategy!r} is a KIP-848 server-side assignor")
    assert "\n" not in message
    path = tmp_path / "x.json"
    path.write_text(doc, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "regroup", "simulate", str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "is a KIP-848 server-side assignor" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("name", ["server-range", "range"])
def test_kip848_members_and_the_coordinator_take_either_name(name: str) -> None:
    parsed = parse(
        scenario(
            member_defaults={"protocol": "consumer", "assignor": name},
            coordinator={"consumer_group_assignors": ["uniform", name]},
        )
    )
    assert {m.assignor for m in parsed.members} == {"range"}  # what the members send
    assert parsed.coordinator_config().consumer_group_assignors == ("uniform", "range")
    states = [e["detail"] for e in simulate(parsed).log.events if e["type"] == "group_state"]
    assert states and all("assignor=server-range " in d for d in states), states  # the log: regroup's name


def test_an_alias_does_not_name_an_assignor_twice() -> None:
    with pytest.raises(ScenarioError, match=r"coordinator.consumer_group_assignors: must not repeat"):
        parse(scenario(coordinator={"consumer_group_assignors": ["server-range", "range"]}), "x.json")


def _serve_config(value: str) -> tuple[str, ...]:
    args = _build_parser().parse_args(["serve", "--consumer-assignors", value])
    return _coordinator_config(args).consumer_group_assignors


def test_serve_takes_either_name() -> None:
    assert _serve_config("uniform,server-range") == ("uniform", "range")
    assert _serve_config("range") == ("range",)
    assert _build_parser().parse_args(["serve"]).consumer_assignors == "uniform,server-range"
    for bad in ("server-range,range", "uniform,sticky", ","):
        with pytest.raises(ServeError, match="--consumer-assignors"):
            _serve_config(bad)


@pytest.mark.parametrize("name", ["optimal", "consistent-hash"])
def test_kip848_members_may_name_the_other_server_side_assignors(name: str) -> None:
    """The coordinator offers what the broker's ``group.consumer.assignors`` lists, regroup's own among them."""
    parsed = parse(
        scenario(
            member_defaults={"protocol": "consumer", "assignor": name}, coordinator={"consumer_group_assignors": [name]}
        )
    )
    assert {m.assignor for m in parsed.members} == {name}
    sim = simulate(parsed)
    states = [e["detail"] for e in sim.log.events if e["type"] == "group_state"]
    assert states and all(f"assignor={name} " in d for d in states), states
    assert not sim.checker.violations
