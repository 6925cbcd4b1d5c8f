"""``regroup users`` (``cli/users.py``) on a temporary data directory: add, list, delete, and its one-line
errors (exit 2) for a bad mechanism or a directory a running server holds."""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path

import pytest

from regroup.cli.users import add_parser, run
from regroup.security.sasl import Complete, Continue
from regroup.security.scram import SCRAM_SHA_512, ScramServer
from regroup.server.scram_store import SCRAM_CREDENTIALS_FILE, ScramStore
from regroup.storage.record_log import lock_directory
from tests.security.test_scram import Client


def users(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="regroup")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(["users", *argv]))


def test_add_list_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    assert users("add", "--data-dir", str(data), "--mechanism", "SCRAM-SHA-512", "--user", "alice",
                 "--password", "alice-secret", "--iterations", "8192") == 0  # fmt: skip
    assert users("add", "--data-dir", str(data), "--mechanism", "SCRAM-SHA-256", "--user", "alice",
                 "--password", "other") == 0  # fmt: skip
    secret = tmp_path / "pw.txt"
    secret.write_text("bob-secret\n", encoding="utf-8")
    assert users("add", "--data-dir", str(data), "--mechanism", "SCRAM-SHA-256", "--user", "bob",
                 "--password-file", str(secret)) == 0  # fmt: skip
    capsys.readouterr()
    assert users("list", "--data-dir", str(data)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "alice\tSCRAM-SHA-256\t4096",
        "alice\tSCRAM-SHA-512\t8192",
        "bob\tSCRAM-SHA-256\t4096",
    ]
    text = (data / SCRAM_CREDENTIALS_FILE).read_text(encoding="utf-8")
    assert "alice-secret" not in text and "bob-secret" not in text
    salt = json.loads(text)["users"]["alice"]["SCRAM-SHA-512"]["salt"]
    assert len(base64.b64decode(salt)) == 32

    # the stored credential authenticates alice
    store = ScramStore(data / SCRAM_CREDENTIALS_FILE)
    store.load()
    server = ScramServer(SCRAM_SHA_512, lambda u: store.lookup("SCRAM-SHA-512", u), lambda: "srv")
    client = Client("sha512", "alice", "alice-secret")
    first = server.evaluate(client.first(), 0)
    assert isinstance(first, Continue)
    assert isinstance(server.evaluate(client.final(first.challenge), 0), Complete)

    assert users("delete", "--data-dir", str(data), "--user", "alice", "--mechanism", "SCRAM-SHA-256") == 0
    assert users("delete", "--data-dir", str(data), "--user", "bob") == 0
    capsys.readouterr()
    assert users("list", "--data-dir", str(data)) == 0
    assert capsys.readouterr().out.splitlines() == ["alice\tSCRAM-SHA-512\t8192"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["add", "--mechanism", "SCRAM-SHA-1", "--user", "a", "--password", "p"], "unknown SCRAM mechanism"),
        (["add", "--mechanism", "SCRAM-SHA-256", "--user", "a", "--password", "p", "--iterations", "100"],
         "4096 to 16384"),
        (["add", "--mechanism", "SCRAM-SHA-256", "--user", "", "--password", "p"], "must not be empty"),
        (["add", "--mechanism", "SCRAM-SHA-256", "--user", "a", "--password", ""], "must not be empty"),
        (["add", "--mechanism", "SCRAM-SHA-256", "--user", "a", "--password-file", "/nonexistent/pw"],
         "cannot read"),
        (["delete", "--user", "nobody"], "has no SCRAM credentials"),
        (["delete", "--user", "nobody", "--mechanism", "PLAIN"], "unknown SCRAM mechanism"),
    ],
)  # fmt: skip
def test_errors_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    assert users(argv[0], "--data-dir", str(data), *argv[1:]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("regroup: ") and message in err


def test_a_missing_data_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert users("list", "--data-dir", str(tmp_path / "nope")) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "nope").exists()


def test_a_damaged_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / SCRAM_CREDENTIALS_FILE).write_text("{not json", encoding="utf-8")
    assert users("list", "--data-dir", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unreadable SCRAM credentials" in err


@pytest.mark.skipif(sys.platform == "win32", reason="no flock")
def test_a_directory_held_by_a_running_server_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "coordinator").mkdir()
    fd = lock_directory(tmp_path / "coordinator")  # what a running `regroup serve` holds
    assert fd is not None
    try:
        for argv in (["add", "--mechanism", "SCRAM-SHA-256", "--user", "a", "--password", "p"], ["list"],
                     ["delete", "--user", "a"]):  # fmt: skip
            assert users(argv[0], "--data-dir", str(tmp_path), *argv[1:]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "in use by a running regroup serve" in err
    finally:
        os.close(fd)
    assert not (tmp_path / SCRAM_CREDENTIALS_FILE).exists()
    assert users("add", "--data-dir", str(tmp_path), "--mechanism", "SCRAM-SHA-256", "--user", "a",
                 "--password", "p") == 0  # fmt: skip
