"""``regroup lab replay`` on the command line: its output in this process (``--no-spark``), and bad input as one line
and exit 2, before anything is simulated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from regroup.cli.main import main
from tests.lab.test_replay import server_rows


def replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["lab", "replay", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def server_log(tmp_path: Path) -> Path:
    path = tmp_path / "server.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in server_rows()), encoding="utf-8")
    return path


def test_a_replay_in_this_process_writes_the_tables_and_the_report(
    capsys: pytest.CaptureFixture[str], server_log: Path, tmp_path: Path
) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text("session_timeout_ms: 10000\nrebalance_timeout_ms: 5000\n", encoding="utf-8")
    out = tmp_path / "out"
    code, stdout, stderr = replay(
        capsys, str(server_log), "--out", str(out), "--group", "ga", "--strategies", "range", "roundrobin",
        "--protocols", "eager,consumer", "--settings", str(settings), "--no-spark",
    )  # fmt: skip
    assert code == 0, stderr
    assert stdout.strip() == str(out / "report.html")
    assert stderr.splitlines()[0] == (
        "regroup lab: replay: group ga, 4 members, 7 changes in 29100 ms; 3 alternatives"
    )  # range/eager, roundrobin/eager, server-range/consumer (roundrobin has no KIP-848 form)
    doc = json.loads((out / "replay.json").read_text(encoding="utf-8"))
    assert [(a["strategy"], a["protocol"]) for a in doc["alternatives"]] == [
        ("server-range", "consumer"), ("range", "eager"), ("roundrobin", "eager")
    ]  # fmt: skip
    assert doc["recorded"]["strategy"] == "range (recorded)"
    assert doc["settings"]["session_timeout_ms"] == 10_000
    assert doc["skipped"] == ["roundrobin/consumer (cannot run)"]
    assert (out / "runs").is_dir() and (out / "rebalances").is_dir() and (out / "lab.json").exists()


def bad_line(tmp_path: Path) -> Path:
    path = tmp_path / "bad.jsonl"
    good = json.dumps(server_rows()[0])
    path.write_text(good + "\n{not json\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (lambda p, t: [str(t / "missing.jsonl")], "{t}/missing.jsonl: cannot read: No such file or directory"),
        (lambda p, t: [str(bad_line(t))], "{t}/bad.jsonl: line 2: invalid JSON: Expecting property name enclosed in "
         "double quotes"),
        (lambda p, t: [str(p)], "{p}: 2 groups in the log, choose one with --group: ga, gb"),
        (lambda p, t: [str(p), "--group", "nope"], "{p}: no group 'nope' in the log (groups: ga, gb)"),
        (lambda p, t: [str(p), "--group", "ga", "--since-ms", "0", "--until-ms", "500"],
         "{p}: group ga: empty window: no member in the group from 0 to 500 ms"),
        (lambda p, t: [str(p), "--group", "ga", "--since-ms", "9", "--until-ms", "9"],
         "{p}: group ga: empty window: --until-ms 9 is not after --since-ms 9"),
        (lambda p, t: [str(p), "--group", "ga", "--strategies", "stiky"],
         "--strategies: unknown strategy 'stiky'"),
        (lambda p, t: [str(p), "--group", "ga", "--settings", str(t / "nope.yaml")],
         "{t}/nope.yaml: cannot read: No such file or directory"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], server_log: Path, tmp_path: Path, args: object, message: str
) -> None:
    argv = args(server_log, tmp_path)  # type: ignore[operator]
    code, stdout, stderr = replay(capsys, *argv, "--out", str(tmp_path / "out"), "--no-spark")
    assert code == 2
    assert stdout == ""
    expected = "regroup: " + message.format(p=server_log, t=tmp_path)
    assert stderr.splitlines() == [stderr.splitlines()[0]] and stderr.startswith(expected), stderr
    assert not (tmp_path / "out").exists()  # nothing was written


def test_a_bad_settings_field_names_the_file_and_the_field(
    capsys: pytest.CaptureFixture[str], server_log: Path, tmp_path: Path
) -> None:
    settings = tmp_path / "s.yaml"
    settings.write_text("session_timeout_ms: soon\n", encoding="utf-8")
    code, _, stderr = replay(
        capsys,
        str(server_log),
        "--group",
        "ga",
        "--settings",
        str(settings),
        "--out",
        str(tmp_path / "o"),
        "--no-spark",
    )
    assert code == 2
    assert stderr == f"regroup: {settings}: settings.session_timeout_ms: must be an integer\n"


def test_the_help_names_the_defaults_the_replay_uses() -> None:
    from regroup.cli.lab import REPLAY_PROTOCOLS, REPLAY_STRATEGIES
    from regroup.lab.replay_run import DEFAULT_PROTOCOLS, DEFAULT_STRATEGIES

    assert REPLAY_STRATEGIES.split() == list(DEFAULT_STRATEGIES)
    assert REPLAY_PROTOCOLS.split() == list(DEFAULT_PROTOCOLS)
