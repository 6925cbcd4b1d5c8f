"""The ``regroup`` command line's edges, run as a user runs them (a subprocess) where the exit code and the
exact output matter: a missing command prints the usage and one line naming what is missing; ``serve`` refuses a
data directory that is a file, leaves nothing behind when it cannot start, and groups its ``--help`` with every
default shown."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from regroup.cli.main import _build_parser


def regroup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "regroup", *args], capture_output=True, text=True, timeout=120)


def test_no_command_prints_the_usage_and_the_commands_to_choose_from() -> None:
    proc = regroup()
    assert (proc.returncode, proc.stdout) == (2, "")
    *usage, error = proc.stderr.splitlines()
    assert usage[0].startswith("usage: regroup [-h] [--version]")
    commands = "assign, strategies, demo, simulate, serve, lab, repair, users, groups"
    assert error == f"regroup: missing command (one of {commands})"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "lab",
            "usage: regroup lab [-h] {sweep,analyze,report,validate,replay} ...\n"
            "regroup: lab: missing command (one of sweep, analyze, report, validate, replay)\n",
        ),
        (
            "users",
            "usage: regroup users [-h] {add,list,delete} ...\n"
            "regroup: users: missing command (one of add, list, delete)\n",
        ),
    ],
)
def test_a_command_without_its_subcommand_prints_its_usage(command: str, expected: str) -> None:
    proc = regroup(command)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", expected)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["nope"], "regroup: invalid choice: 'nope' (choose from 'assign', 'strategies', 'demo', 'simulate', "
                   "'serve', 'lab', 'repair', 'users', 'groups')\n"),
        (["lab", "nope"], "regroup: lab: invalid choice: 'nope' (choose from 'sweep', 'analyze', 'report', "
                          "'validate', 'replay')\n"),
        (["users", "nope"], "regroup: users: invalid choice: 'nope' (choose from 'add', 'list', 'delete')\n"),
    ],
)  # fmt: skip
def test_an_unknown_command_is_one_line_without_internal_names(argv: list[str], expected: str) -> None:
    proc = regroup(*argv)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", expected)


def test_serve_refuses_a_data_directory_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "a-file"
    path.write_text("not a directory")
    proc = regroup("serve", "--port", "0", "--data-dir", str(path))
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"regroup: --data-dir {path}: not a directory\n")
    assert path.read_text() == "not a directory"


@pytest.fixture
def port_in_use() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


def _serve_on(port: int, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return regroup("serve", "--port", str(port), "--data-dir", str(data_dir), "--log-level", "error")


def test_a_failed_start_removes_the_data_directory_it_created(tmp_path: Path, port_in_use: int) -> None:
    for data_dir, created in [(tmp_path / "data", tmp_path / "data"), (tmp_path / "new" / "data", tmp_path / "new")]:
        proc = _serve_on(port_in_use, data_dir)
        assert proc.returncode == 2
        assert proc.stderr.startswith(f"regroup: cannot listen on 127.0.0.1:{port_in_use}")
        assert proc.stderr.count("\n") == 1
        assert not created.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_failed_start_keeps_a_data_directory_that_existed(tmp_path: Path, port_in_use: int) -> None:
    empty, used = tmp_path / "empty", tmp_path / "used"
    empty.mkdir()
    used.mkdir()
    (used / "keep.txt").write_text("kept")
    for data_dir in (empty, used):
        proc = _serve_on(port_in_use, data_dir)
        assert proc.returncode == 2 and proc.stderr.startswith("regroup: cannot listen on"), proc.stderr
    assert empty.is_dir()
    assert (used / "keep.txt").read_text() == "kept"


def _serve_parser() -> argparse.ArgumentParser:
    parser = _build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve: argparse.ArgumentParser = commands.choices["serve"]
    return serve


def test_serve_help_groups_the_options() -> None:
    groups = {g.title: [a.option_strings[0] for a in g._group_actions] for g in _serve_parser()._action_groups}
    assert list(groups) == [
        "positional arguments",
        "options",
        "listeners and security",
        "connections and their limits",
        "storage",
        "logging and metrics",
        "classic groups",
        "KIP-848 consumer groups",
        "KIP-932 share groups",
        "embedded topics",
        "transactions",
        "identifier limits",
    ]
    assert groups["options"] == ["-h", "--config"]
    assert groups["classic groups"] == ["--initial-rebalance-delay-ms"]
    assert all(groups[title] for title in list(groups)[1:])


def test_serve_help_shows_every_default() -> None:
    shown = {}
    for action in _serve_parser()._actions:
        if action.default in (None, argparse.SUPPRESS):
            continue
        value = ("on" if action.default else "off") if isinstance(action.default, bool) else action.default
        shown[action.option_strings[0]] = f"default {value}" in (action.help or "")
    assert shown and all(shown.values()), [option for option, ok in shown.items() if not ok]
    proc = regroup("serve", "--help")
    assert proc.returncode == 0
    assert "(default 3000)" in " ".join(proc.stdout.split("--initial-rebalance-delay-ms MS", 1)[1].split()[:20])


def test_share_groups_flag_overrides_the_configuration_file(tmp_path: Path) -> None:
    from regroup.cli.serve import server_config

    path = tmp_path / "server.properties"
    path.write_text("group.share.enable=true\n", encoding="utf-8")
    config, _ = server_config(_build_parser().parse_args(["serve", "--config", str(path), "--no-share-groups"]))
    assert config.share_groups is False
    assert "group.share.enable" in config.configured


def test_serve_is_the_one_server_of_its_process() -> None:
    """`regroup serve` freezes what it loaded, shortens the thread switch interval (the event loop shares
    the interpreter's lock with the coordinator's writer) and collects its young generation only; a server
    started by another program leaves all three."""
    from regroup.cli.serve import SERVE_GC_YOUNG_THRESHOLD, SERVE_SWITCH_INTERVAL_S, server_config
    from regroup.server.app import ServerConfig

    config, _ = server_config(_build_parser().parse_args(["serve"]))
    assert config.freeze_loaded is True
    assert config.switch_interval_s == SERVE_SWITCH_INTERVAL_S < 0.005
    assert config.gc_young_threshold == SERVE_GC_YOUNG_THRESHOLD > 700
    assert ServerConfig().switch_interval_s is None and ServerConfig().gc_young_threshold is None
