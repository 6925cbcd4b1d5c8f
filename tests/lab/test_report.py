"""The report: results per churn pattern and per strategy and protocol, every series visible, every plot
saying what it measures and which way is better (a plot without data left out, with a sentence), the model
section read from the sweep's settings, plain words, tables narrow enough for a laptop, and per-change figures
that never divide one log's rebalances by another log's changes."""

from __future__ import annotations

import base64
import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest

from regroup.lab import grid, jobs, plots, report
from regroup.sim import parse, simulate
from tests.lab.logs import server_log

GRID = """
name: patterns
members: [2, 3]
topics: [1]
partitions: [6]
churn: [leave, join, crash, {pattern: rolling, events: 2}]
strategies: [range, roundrobin, cooperative-sticky, uniform]
protocols: [eager, cooperative, consumer]
settings: {tail_ms: 12000}
"""


def _images(text: str) -> list[bytes]:
    return [base64.b64decode(b) for b in re.findall(r"src=.data:image/png;base64,([^\"']+)", text)]


def _png_width(png: bytes) -> int:
    return int(struct.unpack(">I", png[16:20])[0])


@pytest.fixture(scope="module")
def swept_report(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, grid.Grid]:
    g = grid.parse(GRID, "patterns.yaml")
    out = tmp_path_factory.mktemp("report")
    result = jobs.sweep(spark, grid.expand(g), show_progress=False)
    meta = {"title": "grid patterns", "axes": g.describe_axes(), "settings": g.settings.to_json()}
    return report.write(result, meta, out).read_text(encoding="utf-8"), g


def test_results_per_churn_pattern(swept_report: tuple[str, grid.Grid]) -> None:
    text, _ = swept_report
    sections = re.findall(r"<h3>([^<]+)</h3>", text)
    assert sections == [
        "Members joining (scale-out)",
        "Members leaving cleanly (scale-in)",
        "Members crashing (noticed when their session times out)",
        "Rolling restart (each member stopped and started again)",
    ]
    for pair in ("range / classic eager", "cooperative-sticky / classic cooperative", "uniform / KIP-848"):
        assert text.count(f"<td>{pair}</td>") == len(sections) + 2  # each pattern, and the two tables over all
    assert "per member crashing" in text and "per member restarted" in text
    assert "Least stop-the-world per member joining:" in text
    why = re.search(r"Least stop-the-world per member leaving:.*? Why: (.*?) \(on average\)", text)
    assert why is not None and why.group(1).count(" partitions per member leaving, ") == 2  # how many, how long


def test_plain_words_and_narrow_tables(swept_report: tuple[str, grid.Grid]) -> None:
    text, _ = swept_report
    for jargon in ("seed 000", "Lab checks", "seeds' tables"):
        assert jargon not in text
    tables = re.findall(r"<table>.*?</table>", text, flags=re.S)
    for table in tables:
        header = re.search(r"<thead><tr>(.*?)</tr></thead>", table, flags=re.S)
        assert header is None or (header.group(1).count("<th>") <= 8 and "<th></th>" not in header.group(1))
        assert all(row.count("<td>") <= 8 for row in re.findall(r"<tr>.*?</tr>", table))
    assert "<thead>" not in tables[0]  # what was run: names and values, no row of empty headers
    assert "max-width:980px" in text and "overflow-x:auto" in text
    assert "http" not in text  # self-contained: nothing to fetch
    assert "FAILED" not in text and text.count(">ok<") == 4


def test_every_plot_says_what_it_measures_and_which_way_is_better(swept_report: tuple[str, grid.Grid]) -> None:
    text, _ = swept_report
    figures = re.findall(r"<figure>(.*?)</figure>", text, flags=re.S)
    assert len(figures) == len(_images(text)) == 5
    for figure in figures:
        caption = re.search(r"<figcaption>(.*?)</figcaption>", figure, flags=re.S)
        assert caption is not None and "lower is better" in caption.group(1)
    assert all(_png_width(png) <= 1000 for png in _images(text))


def test_the_model_section_is_read_from_the_settings(swept_report: tuple[str, grid.Grid]) -> None:
    text, g = swept_report
    model = text[text.index("<h2>Model and assumptions</h2>") : text.index("<h2>Results per churn pattern</h2>")]
    for name, value in g.settings.to_json().items():  # every setting, whatever the grid's settings hold
        if name == "app_json":  # the application model: one row per field the grid set, never a blank row
            assert "<td>app_json</td>" not in model and "<td>commit_on_revoke</td><td>no</td>" in model
            continue
        assert f"<td>{name}</td>" in model
        shown = "not set" if value is None else ("yes" if value is True else "no" if value is False else str(value))
        assert f"<td>{shown}</td>" in model, name
    assert "consumer_session_timeout_ms" in model and "group sizes: 2, 3" in model


def test_identical_series_are_drawn_once_under_every_name() -> None:
    same = [(2.0, 1.0), (3.0, 0.5)]
    merged = plots.merge_identical(
        {"join": {"a": same, "b": list(same), "c": [(2.0, 1.0), (3.0, 0.6)]}, "leave": {"a": same, "b": same}}
    )
    assert merged == {"join": {"a = b": same, "c": [(2.0, 1.0), (3.0, 0.6)]}, "leave": {"a = b": same}}
    apart = plots.merge_identical({"join": {"a": same, "b": same}, "leave": {"a": same, "b": [(2.0, 9.0)]}})
    assert set(apart["join"]) == {"a", "b"}  # identical in one panel only: each keeps its own line everywhere
    style = plots.styles(["a", "b", "c", "d", "e"])
    assert len({(s["marker"], s["linestyle"], s["color"]) for s in style.values()}) == 5
    assert len({s["markersize"] for s in style.values()}) == 5  # nested hollow markers where points coincide
    assert plots.panels("t", {"p": {"a": []}}, "x", "y") is None


def _log(path: Path, doc: dict[str, Any]) -> str:
    path.write_text(simulate(parse(json.dumps(doc))).log.text(), encoding="utf-8")
    return str(path)


TWO = {
    "duration_ms": 30_000,
    "measure_from_ms": 5_000,
    "topics": {"t": 4},
    "member_defaults": {"strategies": ["range"], "auto_commit": False},
    "members": [{"id": "a"}, {"id": "b"}],
}


def test_a_log_without_membership_changes_is_not_divided_by_another_logs(spark: Any, tmp_path: Path) -> None:
    joins = [{"at_ms": 0, "action": "join", "member": m} for m in ("a", "b")]
    grown = _log(
        tmp_path / "grown.jsonl",
        {**TWO, "events": [*joins, {"at_ms": 10_000, "action": "partitions", "topic": "t", "count": 8}]},
    )
    left = _log(
        tmp_path / "left.jsonl", {**TWO, "events": [*joins, {"at_ms": 10_000, "action": "leave", "member": "b"}]}
    )
    result = jobs.analyze(spark, [grown, left], show_progress=False, measure_from_ms=5_000)
    runs = {r["run_id"]: r for r in result.runs.collect()}
    assert runs[grown]["changes"] == 0 and runs[grown]["rebalances"] >= 1  # partitions grew: a rebalance
    assert runs[left]["changes"] == 1 and runs[left]["rebalances"] == 1
    (pair,) = report.aggregates(result)["pairs"]
    assert (pair["changes"], pair["rebalances"]) == (1, 1)  # the grown log's rebalances are not in it
    text = report.render(result, {"title": "two logs", "measure_from_ms": 5_000})
    assert f"{grown} (" in text[text.index("<h2>What did not fit</h2>") :]


def test_a_server_log_report_leaves_out_what_it_cannot_draw(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    path.write_text(server_log().text(), encoding="utf-8")
    result = jobs.analyze(spark, [str(path)], show_progress=False)
    text = report.render(result, {"title": "server"})
    images = _images(text)
    notes = re.findall(r"<p class='note'>No figure: ([^<]+)</p>", text)
    assert len(images) + len(notes) == 5, notes  # every figure is drawn or said to be left out
    assert any(n.startswith("the stop-the-world cost per churn event: no run with churn events shows") for n in notes)
    assert any(n.startswith("membership-protocol bytes per rebalance: no rebalance had payload") for n in notes)
    assert "unowned partition-s per member joining" in text and "<td>–</td>" in text
