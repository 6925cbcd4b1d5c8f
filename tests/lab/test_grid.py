"""Grid files: validation errors name the file and field; expansion is the product of the axes minus the
(strategy, protocol) pairs that cannot run; a run becomes the scenario docs/lab.md describes."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.lab import grid, protocols, scenarios
from regroup.lab.errors import LabInputError

BASE = {
    "members": [3],
    "topics": [2],
    "partitions": [4],
    "strategies": ["range"],
    "protocols": ["eager"],
}


def parse(doc: dict[str, object], source: str = "g.yaml") -> grid.Grid:
    return grid.parse(yaml.safe_dump(doc), source)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"strategies": ["stiky"]}, "g.yaml: strategies[0]: unknown value 'stiky'"),
        ({"protocols": ["bogus"]}, "g.yaml: protocols[0]: protocol 'bogus' is not supported by the simulator"),
        ({"members": [0]}, "g.yaml: members[0]: must be >= 1"),
        ({"members": [3, 3]}, "g.yaml: members: must not repeat a value"),
        ({"members": "many"}, "g.yaml: members[0]: must be an integer"),
        ({"churn": [{"pattern": "leave", "events": 3}]}, "g.yaml: churn[0].events: leave with 3 events needs more"),
        ({"churn": ["explode"]}, "g.yaml: churn[0].pattern: unknown pattern 'explode'"),
        ({"colour": "blue"}, "g.yaml: colour: unknown field"),
        ({"settings": {"heartbeat_interval_ms": 50000}}, "g.yaml: settings.heartbeat_interval_ms: must be lower"),
        ({"protocols": ["cooperative"]}, "g.yaml: protocols: no strategy runs under any listed protocol"),
        ({"seeds": {"count": 0}}, "g.yaml: seeds.count: must be >= 1"),
    ],
)
def test_invalid_grids(change: dict[str, object], message: str) -> None:
    with pytest.raises(LabInputError) as info:
        parse({**BASE, **change})
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_missing_axis_and_bad_syntax() -> None:
    doc = dict(BASE)
    del doc["strategies"]
    with pytest.raises(LabInputError, match=r"^g.yaml: strategies: missing$"):
        parse(doc)
    with pytest.raises(LabInputError, match=r"^g.yaml: invalid YAML at line 2 column 1: "):
        grid.parse("members: [3\n", "g.yaml")
    with pytest.raises(LabInputError, match=r"^g.json: invalid JSON at line 1"):
        grid.parse("{", "g.json")


def test_protocols_known_to_the_simulator() -> None:
    assert protocols.supported()[:2] == ("eager", "cooperative")
    assert protocols.member_settings("eager", "cooperative-sticky") == {"strategies": ["cooperative-sticky", "range"]}
    assert protocols.member_settings("cooperative", "range") is None
    assert protocols.member_settings("eager", "uniform") is None


AXIS_VALUES = {
    "members": st.lists(st.integers(3, 9), min_size=1, max_size=3, unique=True),
    "topics": st.lists(st.integers(1, 3), min_size=1, max_size=2, unique=True),
    "partitions": st.lists(st.integers(1, 20), min_size=1, max_size=3, unique=True),
    "subscriptions": st.lists(st.sampled_from(["all", "staggered"]), min_size=1, max_size=2, unique=True),
    "strategies": st.lists(
        st.sampled_from(["range", "roundrobin", "sticky", "cooperative-sticky", "uniform"]),
        min_size=1,
        max_size=4,
        unique=True,
    ),
    "protocols": st.lists(st.sampled_from(["eager", "cooperative"]), min_size=1, max_size=2, unique=True),
    "seeds": st.lists(st.integers(0, 100), min_size=1, max_size=3, unique=True),
}


@settings(max_examples=60, deadline=None)
@given(
    st.fixed_dictionaries(AXIS_VALUES),
    st.lists(st.sampled_from(["none", "join", "leave", "rolling"]), min_size=1, max_size=3, unique=True),
)
def test_expansion_is_the_product_minus_unrunnable_pairs(doc: dict[str, list[object]], churn: list[str]) -> None:
    doc = {**doc, "churn": [{"pattern": c, "events": 2} if c != "none" else c for c in churn]}
    try:
        g = parse(doc)
    except LabInputError as exc:
        assert "no strategy runs" in str(exc)
        return
    runs = grid.expand(g)
    runnable = len(g.strategies) * len(g.protocols) - len(g.skipped_pairs())
    assert g.combinations() == math.prod(len(v) for v in doc.values())
    assert len(runs) == g.combinations() // (len(g.strategies) * len(g.protocols)) * runnable
    assert len({r.run_id for r in runs}) == len(runs)
    for r in runs:
        assert protocols.member_settings(r.protocol, r.strategy) is not None
        assert grid.RunSpec.from_json(r.to_json()) == r


def test_a_run_becomes_a_scenario() -> None:
    g = parse({**BASE, "churn": [{"pattern": "rolling", "events": 2}], "subscriptions": ["staggered"]})
    (run,) = grid.expand(g)
    doc = scenarios.document(run)
    assert [m["topics"] for m in doc["members"]] == [["t0"], ["t0", "t1"], ["t0"]]
    assert doc["events"][3:] == [
        {"at_ms": 10_000, "action": "leave", "member": "c0"},
        {"at_ms": 15_000, "action": "restart", "member": "c0"},
        {"at_ms": 20_000, "action": "leave", "member": "c1"},
        {"at_ms": 25_000, "action": "restart", "member": "c1"},
    ]
    assert doc["duration_ms"] == 10_000 + 10_000 + 20_000
    assert scenarios.scenario(run).measure_from_ms == 10_000
    joins = grid.expand(parse({**BASE, "churn": [{"pattern": "join", "events": 2}]}))[0]
    assert [m["id"] for m in scenarios.document(joins)["members"]] == ["c0", "c1", "c2", "c3", "c4"]


#: an application model that draws nothing: aligned heartbeats and a fixed processing time
STILL = {"heartbeat_phase": "aligned", "processing_ms": 1}


def test_a_note_when_seeds_cannot_change_a_run() -> None:
    assert parse({**BASE, "seeds": [0], "settings": STILL}).seed_note() is None  # one seed: nothing to vary
    note = parse({**BASE, "seeds": {"count": 3}, "settings": STILL}).seed_note()
    assert note is not None and note.startswith("3 seeds with jitter_ms 0")
    assert parse({**BASE, "seeds": [0, 1], "settings": {**STILL, "jitter_ms": 2}}).seed_note() is None
    assert parse({**BASE, "seeds": [0, 1]}).seed_note() is None  # heartbeat phases drift by seed


def test_jitter_or_drift_make_the_seed_change_the_run_and_without_them_it_does_not() -> None:
    from regroup.sim import simulate

    def log_without_seed(doc: dict[str, object], seed: int) -> list[tuple[object, ...]]:
        run = next(r for r in grid.expand(parse(doc)) if r.seed == seed)
        rows = simulate(scenarios.scenario(run), seed).log.rows
        return [row[1:] for row in rows if row[2] != "sim_start"]  # (sim_start records the seed itself)

    calm = {**BASE, "seeds": [0, 1], "settings": STILL}
    assert log_without_seed(calm, 0) == log_without_seed(calm, 1)
    jittery = {**calm, "settings": {**STILL, "jitter_ms": 3}}
    assert log_without_seed(jittery, 0) != log_without_seed(jittery, 1)
    drifting = {**BASE, "seeds": [0, 1]}  # the default application: heartbeat phases drift by seed
    assert log_without_seed(drifting, 0) != log_without_seed(drifting, 1)


def test_a_scenario_is_parsed_once_per_combination_and_named_per_run() -> None:
    import json
    from dataclasses import replace

    from regroup.sim.scenario import parse as parse_scenario

    runs = grid.expand(parse({**BASE, "churn": [{"pattern": "leave", "events": 1}], "seeds": [0, 4, 9]}))
    built = [scenarios.scenario(run) for run in runs]
    fresh = [parse_scenario(json.dumps(scenarios.document(run)), run.run_id) for run in runs]
    assert built == fresh  # the same as parsing each run's own document
    assert [s.name for s in built] == [r.run_id for r in runs] and len({s.name for s in built}) == 3
    assert replace(built[1], name=built[0].name) == built[0]  # the seeds' scenarios differ only by name


def test_server_side_assignors_run_only_under_kip848_and_by_one_name() -> None:
    g = parse(
        {**BASE, "strategies": ["range", "uniform", "server-range"], "protocols": ["eager", "cooperative", "consumer"]}
    )
    runs = grid.expand(g)
    assert sorted({(r.strategy, r.protocol) for r in runs}) == [
        ("range", "eager"),
        ("server-range", "consumer"),
        ("uniform", "consumer"),
    ]
    reasons = dict(g.skipped())
    assert reasons[("uniform", "eager")] == reasons[("server-range", "cooperative")] == "cannot run"
    assert reasons[("server-range", "consumer")] == "same as range/consumer"  # range under consumer is server-range
    assert ("server-range", "consumer") in g.skipped_pairs() and ("range", "consumer") not in g.skipped_pairs()
    only_alias = grid.expand(parse({**BASE, "strategies": ["range"], "protocols": ["consumer"]}))
    assert {r.strategy for r in only_alias} == {"server-range"}
    assert scenarios.document(only_alias[0])["member_defaults"]["assignor"] == "server-range"
