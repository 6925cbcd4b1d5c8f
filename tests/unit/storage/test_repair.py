"""``regroup.storage.repair`` on both logs — partition logs (Kafka batches) and the coordinator log (RGB1
frames): each kind of damage found and described without changing anything, then truncated or quarantined;
afterwards the log opens, what survives is what was written at those offsets, a quarantine keeps every
unit the damage did not touch, and the next offset handed out is above every offset still known."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regroup.storage.damage import Unit, UnitFormat
from regroup.storage.format import CorruptLogError
from regroup.storage.partition_log import BATCHES, PartitionLog
from regroup.storage.record_log import FRAMES, FsyncPolicy, RecordLog, expected_name, snapshot_floor
from regroup.storage.repair import Mode, RepairError, inspect, repair
from regroup.storage.segment_swap import expected_name as expected_in_partition
from tests.server_data.batches import make_batch
from tests.unit.storage.test_partition_log import decode

NEVER = FsyncPolicy.NEVER


def value(offset: int) -> bytes:
    return b"v%d." % offset * (1 + offset % 3)


@dataclass(frozen=True)
class Kind:
    """One log's way of being built, read back and appended to."""

    name: str
    fmt: UnitFormat
    expected: Callable[[str], bool]

    def build(self, directory: Path, counts: list[int], segment_bytes: int) -> dict[int, bytes]:
        written: dict[int, bytes] = {}
        if self.name == "partition":
            plog = PartitionLog.open(directory, fsync=NEVER, segment_bytes=segment_bytes)
            for n in counts:
                base = plog.log_end_offset
                plog.append(make_batch([value(base + k) for k in range(n)]))
                written.update((base + k, value(base + k)) for k in range(n))
            plog.close()
        else:
            with RecordLog.open(directory, fsync=NEVER, segment_bytes=segment_bytes) as rlog:
                for n in counts:
                    base = rlog.next_offset
                    rlog.append([value(base + k) for k in range(n)])
                    written.update((base + k, value(base + k)) for k in range(n))
        return written

    def read(self, directory: Path) -> dict[int, bytes]:
        """Everything the log serves (raises :class:`CorruptLogError` if it refuses to open or read)."""
        if self.name == "coordinator":
            with RecordLog.open(directory, fsync=NEVER) as rlog:
                return dict(rlog.read(rlog.first_offset))
        plog = PartitionLog.open(directory, fsync=NEVER)
        out: dict[int, bytes] = {}
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            records = [(o, v) for o, v in decode(plog.read(offset, 1 << 20)) if o >= offset]
            if not records:
                break
            out.update((o, v or b"") for o, v in records)
            offset = records[-1][0] + 1
        plog.close()
        return out

    def append(self, directory: Path) -> int:
        """Append one record; its offset."""
        if self.name == "coordinator":
            with RecordLog.open(directory, fsync=NEVER) as rlog:
                return rlog.append([b"after"])
        plog = PartitionLog.open(directory, fsync=NEVER)
        try:
            return plog.append(make_batch([b"after"])).base_offset
        finally:
            plog.close()


PARTITION = Kind("partition", BATCHES, lambda name: False)
COORDINATOR = Kind("coordinator", FRAMES, expected_name)
KINDS = pytest.mark.parametrize("kind", [PARTITION, COORDINATOR], ids=lambda k: k.name)


def units_of(path: Path, fmt: UnitFormat) -> list[Unit]:
    data, pos, out = path.read_bytes(), 0, []
    while pos < len(data):
        unit = fmt.check(data, pos)
        assert isinstance(unit, Unit)
        out.append(unit)
        pos = unit.end
    return out


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x5A
    path.write_bytes(bytes(data))


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


# ---------------------------------------------------------------------- directed


@KINDS
@pytest.mark.parametrize("mode", list(Mode))
def test_damage_mid_log_truncated_or_quarantined(tmp_path: Path, kind: Kind, mode: Mode) -> None:
    log_dir, q = tmp_path / "log", tmp_path / "quarantine"
    written = kind.build(log_dir, [3] * 60, 1 << 20)
    active = segments(log_dir)[0]
    units = units_of(active, kind.fmt)
    flip(active, units[10].pos + 30)  # inside the 11th unit's checksummed bytes
    with pytest.raises(CorruptLogError, match="49 intact"):
        kind.read(log_dir)
    before = snapshot(log_dir)
    [finding] = inspect(log_dir, kind.fmt, q, kind.expected)
    assert snapshot(log_dir) == before and not q.exists()  # a dry run changes nothing
    assert f"at byte {units[10].pos} (offset 30)" in finding.problem and "49 intact" in finding.problem
    assert (
        finding.truncate
        == f"cut the file at byte {units[10].pos}: offsets 30..179 are lost; the log continues at offset 180"
    )
    assert "offsets 30..32 are lost" in (finding.quarantine or "")
    done = repair(log_dir, kind.fmt, mode, q, kind.expected, sync=False)
    assert len(done) == 1
    survived = kind.read(log_dir)
    if mode is Mode.QUARANTINE:
        assert survived == {o: v for o, v in written.items() if not 30 <= o <= 32}
        [saved] = list(q.iterdir())
        assert saved.read_bytes() == before[active.name][units[10].pos : units[11].pos]
    else:
        assert survived == {o: v for o, v in written.items() if o < 30}
    assert kind.append(log_dir) == 180  # no offset handed out twice
    assert inspect(log_dir, kind.fmt, q, kind.expected) == []
    assert repair(log_dir, kind.fmt, mode, q, kind.expected, sync=False) == []  # nothing left to do


@KINDS
@pytest.mark.parametrize("mode", list(Mode))
def test_a_damaged_older_segment(tmp_path: Path, kind: Kind, mode: Mode) -> None:
    log_dir, q = tmp_path / "log", tmp_path / "q"
    written = kind.build(log_dir, [2] * 40, 300)
    files = segments(log_dir)
    assert len(files) >= 4
    older = files[1]
    units = units_of(older, kind.fmt)
    flip(older, units[1].pos + 30)
    lost = range(units[1].base, units[1].last + 1)
    [finding] = inspect(log_dir, kind.fmt, q, kind.expected)
    assert finding.path == older and not finding.torn
    repair(log_dir, kind.fmt, mode, q, kind.expected, sync=False)
    survived = kind.read(log_dir)
    if mode is Mode.QUARANTINE:
        assert survived == {o: v for o, v in written.items() if o not in lost}
    else:  # the rest of that one file is cut; later files stay
        gone = range(units[1].base, units[-1].last + 1)
        assert survived == {o: v for o, v in written.items() if o not in gone}
    assert kind.append(log_dir) == max(written) + 1


@KINDS
def test_missing_segment_and_torn_tail(tmp_path: Path, kind: Kind) -> None:
    log_dir, q = tmp_path / "log", tmp_path / "q"
    written = kind.build(log_dir, [2] * 40, 300)
    files = segments(log_dir)
    missing = {u.base + k for u in units_of(files[2], kind.fmt) for k in range(u.last - u.base + 1)}
    files[2].unlink()
    files[-1].write_bytes(files[-1].read_bytes() + b"\x00torn")
    findings = inspect(log_dir, kind.fmt, q, kind.expected)
    assert [(f.path, f.torn) for f in findings] == [(files[1], False), (files[-1], True)]
    assert "missing" in findings[0].problem and "torn tail" in findings[1].problem
    repair(log_dir, kind.fmt, Mode.QUARANTINE, q, kind.expected, sync=False)
    assert kind.read(log_dir) == {o: v for o, v in written.items() if o not in missing}
    assert (q / f"{files[-1].name}.bytes-{len(files[-1].read_bytes())}-{len(files[-1].read_bytes()) + 5}").exists()


@KINDS
def test_stray_files_and_damaged_names(tmp_path: Path, kind: Kind) -> None:
    log_dir, q = tmp_path / "log", tmp_path / "q"
    written = kind.build(log_dir, [2] * 30, 300)
    files = segments(log_dir)
    files[1].rename(log_dir / files[1].name[1:])  # a name cut short
    files[2].rename(log_dir / "segment.bak")  # renamed beyond recognition
    (log_dir / "notes.txt").write_text("not a segment")
    (log_dir / "00000000000000000000.log.tmp").write_bytes(b"half a copy")  # an interrupted repair's
    with pytest.raises(CorruptLogError, match="unexpected file"):
        kind.read(log_dir)
    problems = {f.path.name: f.problem for f in inspect(log_dir, kind.fmt, q, kind.expected)}
    assert set(problems) == {files[1].name[1:], "segment.bak", "notes.txt", "00000000000000000000.log.tmp"}
    assert "starts like a segment" in problems["segment.bak"]
    repair(log_dir, kind.fmt, Mode.TRUNCATE, q, kind.expected, sync=False)
    assert kind.read(log_dir) == written  # both segments renamed back from their first unit's offset
    assert sorted(p.name for p in q.iterdir()) == ["notes.txt"]


@KINDS
def test_unfixable_problems_are_reported_not_guessed(tmp_path: Path, kind: Kind) -> None:
    log_dir, q = tmp_path / "log", tmp_path / "q"
    kind.build(log_dir, [2] * 30, 300)
    files = segments(log_dir)
    files[-1].unlink()
    (log_dir / files[-1].name.replace(".log", ".gap")).write_text("lost\n")
    with pytest.raises(RepairError, match="active segment is missing"):
        repair(log_dir, kind.fmt, Mode.QUARANTINE, q, kind.expected, sync=False)


def test_an_interrupted_quarantine_finishes_when_run_again(tmp_path: Path) -> None:
    """The kept units were copied and the gap written, but the crash came before the damaged file was cut."""
    log_dir, q = tmp_path / "log", tmp_path / "q"
    written = PARTITION.build(log_dir, [3] * 20, 1 << 20)
    active = segments(log_dir)[0]
    units = units_of(active, BATCHES)
    flip(active, units[5].pos + 40)
    damaged = active.read_bytes()
    repair(log_dir, BATCHES, Mode.QUARANTINE, q, sync=False)
    active.write_bytes(damaged)  # undo the last step
    with pytest.raises(CorruptLogError):
        PARTITION.read(log_dir)
    repair(log_dir, BATCHES, Mode.QUARANTINE, q, sync=False)
    assert PARTITION.read(log_dir) == {o: v for o, v in written.items() if not 15 <= o <= 17}


@pytest.mark.parametrize("byte", [0, 7], ids=["high", "low"])
def test_a_damaged_batch_offset_is_not_believed(tmp_path: Path, byte: int) -> None:
    """A Kafka batch's baseOffset lies outside its CRC: a batch after damage whose offset was hit must not be
    kept under offsets it never had (its successor does not continue it; a huge one breaks Kafka's bound)."""
    log_dir, q = tmp_path / "log", tmp_path / "q"
    written = PARTITION.build(log_dir, [2] * 12, 1 << 20)
    active = segments(log_dir)[0]
    units = units_of(active, BATCHES)
    flip(active, units[5].pos + 30)
    flip(active, units[8].pos + byte)
    repair(log_dir, BATCHES, Mode.QUARANTINE, q, sync=False)
    lost = {10, 11, 16, 17}
    assert PARTITION.read(log_dir) == {o: v for o, v in written.items() if o not in lost}
    assert PARTITION.append(log_dir) == 24


def test_the_coordinator_log_continues_past_its_newest_snapshot(tmp_path: Path) -> None:
    """The last frame damaged after a snapshot covering it: cut as a torn tail, the log would end before its
    snapshot (which the log refuses); the repair continues it after the snapshot instead."""
    log_dir, q = tmp_path / "log", tmp_path / "q"
    written = COORDINATOR.build(log_dir, [1] * 20, 1 << 20)
    with RecordLog.open(log_dir, fsync=NEVER) as rlog:
        rlog.snapshot(19, b"state@19")
    active = segments(log_dir)[-1]
    flip(active, units_of(active, FRAMES)[-1].pos + 30)
    damaged = active.read_bytes()
    with pytest.raises(CorruptLogError, match="ahead of the log"):
        RecordLog.open(log_dir, fsync=NEVER)
    assert active.read_bytes() == damaged  # refused before cutting anything
    findings = inspect(log_dir, FRAMES, q, expected_name, snapshot_floor)
    assert [f.torn for f in findings] == [True, False]
    assert "newest snapshot covers offsets up to 19" in findings[1].problem
    repair(log_dir, FRAMES, Mode.TRUNCATE, q, expected_name, snapshot_floor, sync=False)
    with RecordLog.open(log_dir, fsync=NEVER) as rlog:
        assert rlog.next_offset == 20 and rlog.load()[:2] == (19, b"state@19")
        assert dict(rlog.read(0)) == {o: v for o, v in written.items() if o < 19}
        assert rlog.append([b"next"]) == 20


# ---------------------------------------------------------------------- property


damage_st = st.lists(
    st.one_of(
        st.tuples(st.just("flip"), st.integers(0, 99), st.integers(0, 10**6)),
        st.tuples(st.just("cut"), st.integers(0, 99), st.integers(0, 10**6)),
        st.tuples(st.just("garbage"), st.integers(0, 99), st.integers(0, 10**6), st.binary(min_size=1, max_size=40)),
        st.tuples(st.just("delete"), st.integers(0, 99)),
    ),
    min_size=1,
    max_size=3,
)


@pytest.mark.parametrize("kind", [PARTITION, COORDINATOR], ids=lambda k: k.name)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    counts=st.lists(st.integers(1, 4), min_size=1, max_size=30),
    damage=damage_st,
    mode=st.sampled_from(list(Mode)),
)
def test_any_damage_repairs_to_a_log_that_keeps_what_it_can(
    tmp_path_factory: pytest.TempPathFactory,
    kind: Kind,
    counts: list[int],
    damage: list[tuple[object, ...]],
    mode: Mode,
) -> None:
    base = tmp_path_factory.mktemp(kind.name)
    log_dir, q = base / "log", base / "q"
    written = kind.build(log_dir, counts, 200)
    files = segments(log_dir)
    layout = {f.name: units_of(f, kind.fmt) for f in files}
    touched: set[tuple[str, int]] = set()  # (file, unit index) of units the damage reached
    for op in damage:
        name = files[int(op[1]) % len(files)].name  # type: ignore[call-overload]
        path = log_dir / name
        if op[0] == "delete":
            if name == files[-1].name or not path.exists():
                continue  # the active file vanishing whole is undetectable: not what repair is for
            path.unlink()
            touched |= {(name, i) for i in range(len(layout[name]))}
            continue
        if not path.exists() or not path.stat().st_size:
            continue
        data = bytearray(path.read_bytes())
        at = int(op[2]) % len(data)  # type: ignore[call-overload]
        hit = [i for i, u in enumerate(layout[name]) if u.pos <= at < u.end]
        into = at - layout[name][hit[0]].pos if hit else -1
        if kind is PARTITION and hit and op[0] != "cut" and (into < 8 or (op[0] == "garbage" and into == 8)):
            # a Kafka batch's baseOffset lies outside its CRC (see the base-offset tests): damage in it, or
            # bytes inserted right after it (the batch then reads intact behind a base offset of garbage)
            continue
        if op[0] == "flip":
            data[at] ^= 0x5A
            touched |= {(name, i) for i in hit}
        elif op[0] == "cut":
            del data[at:]
            touched |= {(name, i) for i, u in enumerate(layout[name]) if u.end > at}
        else:
            data[at:at] = op[3]  # type: ignore[index]
            touched |= {(name, i) for i in hit if layout[name][i].pos < at}
            layout[name] = [
                u if u.end <= at else Unit(u.pos + len(op[3]), u.end + len(op[3]), u.base, u.last)  # type: ignore[arg-type]
                for u in layout[name]
            ]
        path.write_bytes(bytes(data))
    intact = {
        o: written[o]
        for name, units in layout.items()
        for i, u in enumerate(units)
        if (name, i) not in touched
        for o in range(u.base, u.last + 1)
    }
    repair(log_dir, kind.fmt, mode, q, kind.expected, sync=False)
    assert inspect(log_dir, kind.fmt, q, kind.expected) == []
    survived = kind.read(log_dir)
    assert all(written.get(o) == v for o, v in survived.items())  # nothing served under a wrong offset
    if mode is Mode.QUARANTINE:
        assert intact.items() <= survived.items()  # every unit the damage did not reach is kept
    assert kind.append(log_dir) > max(intact, default=-1)  # no offset still known is handed out again
    assert os.listdir(log_dir)


# ---------------------------------------------------------------------- a roll a crash interrupted


def rolled(tmp_path: Path) -> tuple[Path, Path, Path, dict[int, bytes], list[Unit]]:
    """A partition whose newest segment a crash left under its temporary name (``<base>.rolling``, before the
    roll's rename): the log directory, the segment before it, the ``.rolling`` file, what was written, and the
    previous segment's batches."""
    log_dir = tmp_path / "log"
    written = PARTITION.build(log_dir, [2] * 30, 300)
    *_, previous, last = segments(log_dir)
    rolling = last.with_name(last.name.replace(".log", ".rolling"))
    last.rename(rolling)
    return log_dir, previous, rolling, written, units_of(previous, BATCHES)


def served_after_open(log_dir: Path, tmp_path: Path) -> dict[int, bytes]:
    """What the partition serves once opened as is (on a copy: the directory is left alone)."""
    copy = tmp_path / "opened"
    shutil.copytree(log_dir, copy)
    return PARTITION.read(copy)


@pytest.mark.parametrize("mode", list(Mode))
def test_a_rolling_segment_after_a_whole_one_is_renamed_as_open_does(tmp_path: Path, mode: Mode) -> None:
    log_dir, _, rolling, written, _ = rolled(tmp_path)
    q = tmp_path / "q"
    [finding] = inspect(log_dir, BATCHES, q, expected_in_partition)
    assert finding.path == rolling and finding.torn  # not damage: the server settles it itself
    assert "roll" in finding.problem and "is whole" in finding.problem
    assert finding.plan(mode) == f"rename it to {rolling.stem}.log (what the server does itself on the next start)"
    assert served_after_open(log_dir, tmp_path) == written
    done = repair(log_dir, BATCHES, mode, q, expected_in_partition, sync=False)
    assert len(done) == 1 and "renamed to" in done[0]
    assert not rolling.exists() and rolling.with_suffix(".log").exists() and not q.exists()
    assert PARTITION.read(log_dir) == written
    assert inspect(log_dir, BATCHES, q, expected_in_partition) == []


@pytest.mark.parametrize("mode", list(Mode))
def test_a_rolling_segment_after_a_torn_one_is_removed_as_open_does(tmp_path: Path, mode: Mode) -> None:
    """A power loss cut the segment before it: nothing after that segment's tail was on disk, so the new file
    goes (``QUARANTINE`` keeps its bytes aside) and the torn tail is cut."""
    log_dir, previous, rolling, written, units = rolled(tmp_path)
    q = tmp_path / "q"
    with previous.open("r+b") as f:
        f.truncate(units[-1].pos + 20)  # the last batch torn
    rolled_bytes = rolling.read_bytes()
    kept = {o: v for o, v in written.items() if o < units[-1].base}
    findings = inspect(log_dir, BATCHES, q, expected_in_partition)
    assert [(f.path, f.torn) for f in findings] == [(rolling, True), (previous, True)]
    assert "short of" in findings[0].problem and findings[0].truncate is not None
    assert findings[0].truncate.startswith("delete it")
    assert served_after_open(log_dir, tmp_path) == kept
    repair(log_dir, BATCHES, mode, q, expected_in_partition, sync=False)
    assert not rolling.exists() and not rolling.with_suffix(".log").exists()
    if mode is Mode.QUARANTINE:
        assert (q / rolling.name).read_bytes() == rolled_bytes
    assert PARTITION.read(log_dir) == kept
    assert PARTITION.append(log_dir) == units[-1].base  # the log continues where the torn tail began
    assert inspect(log_dir, BATCHES, q, expected_in_partition) == []


def test_a_rolling_segment_after_a_damaged_one_is_damage(tmp_path: Path) -> None:
    """Open refuses (damage, not a torn tail); repair renames the new file, then repairs the damage like an older
    segment's, keeping every intact batch."""
    log_dir, previous, rolling, written, units = rolled(tmp_path)
    q = tmp_path / "q"
    flip(previous, units[0].pos + 30)
    with pytest.raises(CorruptLogError, match="damage"):
        PARTITION.read(log_dir)
    first, *rest = inspect(log_dir, BATCHES, q, expected_in_partition)
    assert first.path == rolling and not first.torn and "the segment before it is damaged" in first.problem
    assert [f.path for f in rest] == [previous]  # the damage itself, repaired once the new file is renamed
    assert first.quarantine is not None and first.quarantine.startswith(f"rename it to {rolling.stem}.log")
    repair(log_dir, BATCHES, Mode.QUARANTINE, q, expected_in_partition, sync=False)
    lost = range(units[0].base, units[0].last + 1)
    assert PARTITION.read(log_dir) == {o: v for o, v in written.items() if o not in lost}
    assert PARTITION.append(log_dir) == max(written) + 1


def test_two_rolling_segments_are_reported_not_guessed(tmp_path: Path) -> None:
    log_dir, previous, rolling, _, _ = rolled(tmp_path)
    previous.rename(previous.with_suffix(".rolling"))
    with pytest.raises(CorruptLogError):
        PARTITION.read(log_dir)
    findings = inspect(log_dir, BATCHES, tmp_path / "q", expected_in_partition)
    assert {f.path for f in findings if f.plan(Mode.QUARANTINE) is None} == {rolling, previous.with_suffix(".rolling")}
    with pytest.raises(RepairError, match="must be the only one"):
        repair(log_dir, BATCHES, Mode.QUARANTINE, tmp_path / "q", expected_in_partition, sync=False)
    assert rolling.exists() and previous.with_suffix(".rolling").exists()
