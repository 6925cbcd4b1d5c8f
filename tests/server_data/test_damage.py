"""Damaged data directories against a real ``regroup serve`` and ``regroup repair``, for both logs — the
partition log (Kafka batches) and the coordinator log (offset commits). A torn tail is cut and logged; a
flipped byte mid-log, a damaged older segment, a segment whose name was damaged: the server refuses to start
with one line naming the file (and the byte), the dry run reports it and changes nothing, ``--quarantine`` or
``--truncate`` repairs it, and the server then starts and hands out no offset twice."""

from __future__ import annotations

import contextlib
import io
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from regroup.cli.main import main
from regroup.records import serde
from regroup.records.builders import new_offset_commit_record
from regroup.records.model import OffsetCommitValue
from regroup.server.topics import TopicStore
from regroup.storage.damage import Unit
from regroup.storage.format import CorruptLogError
from regroup.storage.partition_log import BATCHES
from regroup.storage.record_log import FRAMES, FsyncPolicy, RecordLog
from tests.server.conftest import ServerProcess, free_port
from tests.server.test_offsets_admin import commit
from tests.server.wire import OFFSET_FETCH, WireClient
from tests.server_data.batches import make_batch
from tests.server_data.test_many_partitions import produce

TOPIC, GROUP, UNITS = "orders", "g", 60
NEVER = FsyncPolicy.NEVER


# ---------------------------------------------------------------------- data directories


def partition_data(data_dir: Path, segment_bytes: int = 64 << 20) -> Path:
    """Topic ``orders`` (1 partition): 60 batches of 3 records, values ``b"v<offset>"``; its directory."""
    with TopicStore.open(data_dir / "topics", fsync=NEVER, segment_bytes=segment_bytes) as store:
        store.create_topic(TOPIC, 1)
        plog = store.partition(TOPIC, 0)
        assert plog is not None
        for i in range(UNITS):
            plog.append(make_batch([b"v%d" % (3 * i + k) for k in range(3)]))
    return data_dir / "topics" / "topics" / TOPIC / "0"


def coordinator_data(data_dir: Path, segment_bytes: int = 64 << 20) -> Path:
    """60 frames, frame ``i`` committing offset ``i`` for ``orders``/``i % 3`` in group ``g``; the directory."""
    with TopicStore.open(data_dir / "topics", fsync=NEVER) as store:
        store.create_topic(TOPIC, 3)
    directory = data_dir / "coordinator"
    with RecordLog.open(directory, fsync=NEVER, segment_bytes=segment_bytes) as rlog:
        for i in range(UNITS):
            value = OffsetCommitValue(
                offset=i, leader_epoch=-1, metadata="", commit_timestamp_ms=1, expire_timestamp_ms=None
            )
            rlog.append([serde.encode(new_offset_commit_record(GROUP, TOPIC, i % 3, value))])
    return directory


LOGS: dict[str, Callable[..., Path]] = {"partition": partition_data, "coordinator": coordinator_data}


def units(path: Path, kind: str) -> list[Unit]:
    fmt = BATCHES if kind == "partition" else FRAMES
    data, pos, out = path.read_bytes(), 0, []
    while pos < len(data):
        unit = fmt.check(data, pos)
        assert isinstance(unit, Unit)
        out.append(unit)
        pos = unit.end
    return out


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x40
    path.write_bytes(bytes(data))


# ---------------------------------------------------------------------- processes


def regroup(*args: str) -> subprocess.CompletedProcess[str]:
    """``regroup repair ...`` — the command's own entry point, run in this process (it starts no server)."""
    assert args[0] == "repair"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(["regroup", *args], code, out.getvalue(), err.getvalue())


def refused(data_dir: Path) -> str:
    """Start ``regroup serve`` on a damaged directory: it must exit 2 with one line; that line."""
    command = [sys.executable, "-m", "regroup", "serve", "--data-dir", str(data_dir), "--port", str(free_port())]
    result = subprocess.run([*command, "--log-level", "error"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[Path], ServerProcess]]:
    started: list[ServerProcess] = []

    def start(data_dir: Path) -> ServerProcess:
        srv = ServerProcess(data_dir, tmp_path / f"server{len(started)}.log", ["--log-level", "warning"])
        started.append(srv)
        srv.start()
        return srv

    yield start
    for srv in started:
        srv.kill()
        assert "Traceback" not in srv.log() and " ERROR " not in srv.log(), srv.log()


def committed(port: int) -> dict[int, int]:
    with WireClient(port) as client:
        fetched = client.call(OFFSET_FETCH, 5, group_id=GROUP, topics=None)
    return {p.partition_index: p.committed_offset for t in fetched.topics for p in t.partitions}


def record_offsets(directory: Path) -> list[int]:
    with RecordLog.open(directory, fsync=NEVER) as rlog:
        return [offset for offset, _ in rlog.read(rlog.first_offset)]


def next_offset_after_restart(kind: str, srv: ServerProcess, log_dir: Path) -> int:
    """Write once more through the running server and stop it: the offset that write got."""
    with WireClient(srv.port) as client:
        if kind == "partition":
            [(error, offset)] = produce(client, TOPIC, [0], b"after")
            assert error == 0
            return offset
        assert commit(client, 8, GROUP, {(TOPIC, 0): 1000}) == {(TOPIC, 0): 0}
    assert srv.kill(signal.SIGTERM) == 0
    return record_offsets(log_dir)[-1]


# ---------------------------------------------------------------------- tests


@pytest.mark.parametrize("kind", LOGS)
def test_a_torn_tail_is_cut_and_logged(tmp_path: Path, serve: Callable[[Path], ServerProcess], kind: str) -> None:
    log_dir = LOGS[kind](tmp_path / "data")
    active = sorted(log_dir.glob("*.log"))[-1]
    whole = active.read_bytes()
    torn = whole[units(active, kind)[-1].pos :][:-9]  # the last unit again, cut short: a crash mid-write
    active.write_bytes(whole + torn)
    srv = serve(tmp_path / "data")
    assert f"truncating {len(torn)} byte(s) of torn tail at byte {len(whole)}" in srv.log()
    if kind == "coordinator":
        assert committed(srv.port) == {0: 57, 1: 58, 2: 59}
    assert next_offset_after_restart(kind, srv, log_dir) == 3 * UNITS if kind == "partition" else UNITS


@pytest.mark.parametrize("mode", ["quarantine", "truncate"])
@pytest.mark.parametrize("kind", LOGS)
def test_damage_mid_log_refuses_to_start_until_repaired(
    tmp_path: Path, serve: Callable[[Path], ServerProcess], kind: str, mode: str
) -> None:
    data_dir = tmp_path / "data"
    log_dir = LOGS[kind](data_dir)
    active = sorted(log_dir.glob("*.log"))[-1]
    bad = units(active, kind)[10]
    flip(active, bad.pos + 30)
    damaged = active.read_bytes()
    line = refused(data_dir)
    assert f"{active}: " in line and f"at byte {bad.pos}" in line and "49 intact" in line
    assert f"regroup repair --data-dir {data_dir}" in line

    report = regroup("repair", "--data-dir", str(data_dir))
    assert report.returncode == 1 and f"{active}: " in report.stdout and "--quarantine" in report.stdout
    assert active.read_bytes() == damaged  # the dry run changed nothing
    fixed = regroup("repair", "--data-dir", str(data_dir), f"--{mode}")
    assert fixed.returncode == 0, fixed
    assert regroup("repair", "--data-dir", str(data_dir)).returncode == 0

    srv = serve(data_dir)
    if kind == "partition":  # offsets 0..179 were written, 30..32 damaged
        assert next_offset_after_restart(kind, srv, log_dir) == 180
        return
    # frame i committed offset i for partition i % 3; frame 10 is gone, and with --truncate all after it
    assert committed(srv.port) == ({0: 57, 1: 58, 2: 59} if mode == "quarantine" else {0: 9, 1: 7, 2: 8})
    assert next_offset_after_restart(kind, srv, log_dir) >= UNITS  # no record offset handed out twice
    survivors = record_offsets(log_dir)[:-1]
    assert survivors == [o for o in range(UNITS) if o != 10] if mode == "quarantine" else list(range(10))


@pytest.mark.parametrize("kind", LOGS)
def test_a_damaged_older_segment(tmp_path: Path, serve: Callable[[Path], ServerProcess], kind: str) -> None:
    data_dir = tmp_path / "data"
    log_dir = LOGS[kind](data_dir, segment_bytes=800)
    files = sorted(log_dir.glob("*.log"))
    assert len(files) >= 3
    older = files[1]
    bad = units(older, kind)[1]
    flip(older, bad.pos + 30)
    line = refused(data_dir)
    assert f"{older}: " in line and f"at byte {bad.pos}" in line
    assert regroup("repair", "--data-dir", str(data_dir), "--quarantine").returncode == 0
    srv = serve(data_dir)
    if kind == "partition":
        assert next_offset_after_restart(kind, srv, log_dir) == 3 * UNITS
    else:
        assert committed(srv.port) == {0: 57, 1: 58, 2: 59}
        assert next_offset_after_restart(kind, srv, log_dir) == UNITS


@pytest.mark.parametrize("kind", LOGS)
def test_a_damaged_segment_name_and_a_stray_file(
    tmp_path: Path, serve: Callable[[Path], ServerProcess], kind: str
) -> None:
    """Left unnoticed, a renamed active segment drops its data and the next write reuses its offsets."""
    data_dir = tmp_path / "data"
    log_dir = LOGS[kind](data_dir, segment_bytes=800)
    active = sorted(log_dir.glob("*.log"))[-1]
    active.rename(log_dir / active.name[2:])
    (log_dir / "notes.txt").write_text("hello")
    line = refused(data_dir)
    assert "unexpected file" in line and str(log_dir) in line
    report = regroup("repair", "--data-dir", str(data_dir))
    assert report.returncode == 1 and f"rename it to {active.name}" in report.stdout
    assert regroup("repair", "--data-dir", str(data_dir), "--truncate").returncode == 0
    assert (data_dir / "quarantine").rglob("notes.txt")
    srv = serve(data_dir)
    assert next_offset_after_restart(kind, srv, log_dir) == (3 * UNITS if kind == "partition" else UNITS)


def test_repair_arguments_and_a_busy_data_dir(tmp_path: Path, serve: Callable[[Path], ServerProcess]) -> None:
    data_dir = tmp_path / "data"
    partition_data(data_dir)
    for args, message in [
        (["--data-dir", str(tmp_path / "nowhere")], "does not exist"),
        (["--data-dir", str(data_dir), "--partition", "0"], "--partition needs --topic"),
        (["--data-dir", str(data_dir), "--topic", "nope"], "no topic 'nope'"),
        (["--data-dir", str(data_dir), "--topic", TOPIC, "--partition", "5"], "partitions 0..0"),
        (["--data-dir", str(data_dir), "--truncate", "--quarantine"], "not allowed with"),
    ]:
        result = regroup("repair", *args)
        assert (result.returncode, result.stderr.count("\n")) == (2, 1) and message in result.stderr, result
    clean = regroup("repair", "--data-dir", str(data_dir), "--topic", TOPIC, "--partition", "0")
    assert (clean.returncode, clean.stdout.splitlines()[-1]) == (0, "no damage found")
    serve(data_dir)
    busy = regroup("repair", "--data-dir", str(data_dir))
    assert busy.returncode == 2 and "in use by a running regroup serve" in busy.stderr


def test_stray_files_beside_the_partitions(tmp_path: Path) -> None:
    """A topic directory holds topic.json and partition directories 0..N-1; anything else refuses the open
    (it could be a partition's data under a damaged name) until the repair moves it aside."""
    data_dir = tmp_path / "data"
    topic_dir = partition_data(data_dir).parent
    (topic_dir / "1").mkdir()  # the topic has one partition
    (topic_dir / "1" / "00000000000000000000.log").write_bytes(b"")
    with pytest.raises(CorruptLogError, match="unexpected file in a topic of 1 partition"):
        TopicStore.open(data_dir / "topics")
    report = regroup("repair", "--data-dir", str(data_dir))
    assert report.returncode == 1 and f"{topic_dir / '1'}: unexpected file in a topic directory" in report.stdout
    assert regroup("repair", "--data-dir", str(data_dir), "--quarantine").returncode == 0
    assert (data_dir / "quarantine" / "topics" / TOPIC / "1" / "00000000000000000000.log").exists()
    with TopicStore.open(data_dir / "topics") as store:
        plog = store.partition(TOPIC, 0)
        assert plog is not None and plog.log_end_offset == 3 * UNITS
