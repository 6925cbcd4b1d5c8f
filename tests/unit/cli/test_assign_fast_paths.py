"""``regroup assign``'s fast paths give what the plain ones give: reading the input on arrays, ``sticky``
without the round trip through user data, and the output document."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors import metrics, registry
from regroup.assignors.spec import GroupSpec
from regroup.cli.assign_input import InputError, _parse_member, parse_document
from regroup.cli.assign_run import assignment_of, render
from regroup.cli.main import main

TOPICS = ["t0", "t1", "t2", "ghost"]


def plain_parse(doc: dict[str, Any]) -> GroupSpec:
    """The spec member by member (the reading every document had before the array path)."""
    topics = doc["topics"]
    members = {m: _parse_member(m, raw, topics) for m, raw in doc["members"].items()}
    return GroupSpec(topics=topics, members=members)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    counts = {t: draw(st.integers(0, 5)) for t in TOPICS[:3]}
    members: dict[str, Any] = {}
    for m in draw(st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=3)):
        raw: dict[str, Any] = {"topics": draw(st.lists(st.sampled_from(TOPICS), max_size=4))}
        if draw(st.booleans()):
            owned = draw(st.dictionaries(st.sampled_from(TOPICS), st.lists(st.integers(0, 4), max_size=5), max_size=3))
            raw["owned"] = {t: [p for p in ps if p < counts.get(t, 99)] for t, ps in owned.items()}
        if draw(st.booleans()):
            raw["generation"] = draw(st.one_of(st.none(), st.integers(-1, 3)))
        if draw(st.booleans()):
            raw["rack"] = draw(st.sampled_from([None, "r1", ""]))
        members[m] = raw
    return {"topics": counts, "members": members}


@settings(max_examples=300)
@given(documents())
def test_reading_on_arrays_gives_the_member_by_member_spec(doc: dict[str, Any]) -> None:
    spec, previous = parse_document(json.dumps(doc).encode())
    assert spec == plain_parse(doc)
    assert previous == {m: sub.owned for m, sub in spec.members.items()}


def test_documents_python_reads_and_orjson_does_not_are_still_read() -> None:
    doc = '{"topics": {"t": 1}, "members": {"a": {"topics": ["t"]}}, "options": {"x": NaN, "y": 1e999}}'
    spec, _ = parse_document(doc)
    assert spec.topics == {"t": 1}
    with pytest.raises(InputError, match="malformed JSON"):
        parse_document(b"{")
    with pytest.raises(InputError, match="not UTF-8"):
        parse_document(b'{"topics": {"\xff": 1}}')


def random_spec(rng: random.Random) -> dict[str, Any]:
    counts = {f"t{j}": rng.randint(1, 8) for j in range(rng.randint(1, 3))}
    racks = ["r1", "r2", "r3"]
    members: dict[str, Any] = {}
    for i in range(rng.randint(1, 5)):
        subscribed = rng.sample(sorted(counts), rng.randint(1, len(counts)))
        owned: dict[str, list[int]] = {}
        for t in subscribed:
            owned[t] = sorted(rng.sample(range(counts[t]), rng.randint(0, counts[t])))
        members[f"m{i}"] = {
            "topics": subscribed,
            "owned": owned,
            "generation": rng.choice([None, 1, 2, 3]),
            "rack": rng.choice([None, *racks]),
        }
    doc: dict[str, Any] = {"topics": counts, "members": members}
    if rng.random() < 0.6:
        doc["partition_racks"] = {
            t: [rng.sample(racks, rng.randint(0, 2)) for _ in range(n)] for t, n in counts.items()
        }
    return doc


@pytest.mark.parametrize("seed", range(300))
def test_sticky_reads_owned_partitions_as_its_user_data_gives_them(seed: int) -> None:
    spec, _ = parse_document(json.dumps(random_spec(random.Random(seed))).encode())
    for rack_logic in (False, True):
        assignor = registry.get("sticky")
        assignor.prefer_rack_aware_logic = rack_logic  # type: ignore[attr-defined]
        assert assignment_of(assignor, spec) == assignor.assign(assignor.with_previous(spec))


@pytest.mark.parametrize(
    "strategy", ["range", "roundrobin", "sticky", "cooperative-sticky", "uniform", "optimal", "consistent-hash"]
)
def test_the_output_is_the_document_as_first_written(
    strategy: str, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    doc = random_spec(random.Random(7))
    path = tmp_path / "group.json"
    path.write_text(json.dumps(doc))
    assert main(["assign", "--strategy", strategy, "--input", str(path)]) == 0
    printed = json.loads(capsys.readouterr().out)

    spec, _ = parse_document(path.read_bytes())
    assignor = registry.get(strategy)
    assignment = assignor.assign(assignor.with_previous(spec))
    previous = {m: {t: list(ps) for t, ps in sub.owned.items()} for m, sub in spec.members.items()}
    report: dict[str, object] = {
        "valid": metrics.is_valid(spec, assignment),
        "members": len(assignment),
        "partitions_assigned": sum(metrics.loads(assignment).values()),
        "min_partitions": min(metrics.loads(assignment).values()),
        "max_partitions": max(metrics.loads(assignment).values()),
        "max_min_spread": metrics.max_min_spread(assignment),
        "balance_score": metrics.balance_score(assignment),
        "kip54_balanced": metrics.kip54_balanced(spec, assignment),
        "partitions_moved": metrics.partitions_moved(previous, assignment),
        "fraction_kept": round(metrics.fraction_kept(previous, assignment), 6),
        **assignor.extra_metrics(spec, assignment),
    }
    expected = json.dumps({"assignment": dict(assignment.items()), "metrics": report})
    assert printed == json.loads(expected)


def test_render_falls_back_to_python_for_what_orjson_does_not_write() -> None:
    assert json.loads(render({"n": 2**70, "k": {1: 2}}, None)) == {"n": 2**70, "k": {"1": 2}}
    assert render({"a": [1]}, 2) == b'{\n  "a": [\n    1\n  ]\n}\n'
    assert render({"a": [1]}, None) == b'{"a":[1]}\n'
