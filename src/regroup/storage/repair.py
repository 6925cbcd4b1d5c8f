"""Offline repair of one log directory — a partition's or the coordinator's — for ``regroup repair``.

A shell (docs/architecture.md). :func:`inspect` verifies every segment in full (structure, checksums,
offsets continuing from each file's base and ending where the next file begins) and describes each problem
and what each repair would do; :func:`repair` fixes the problems one at a time, re-checking the directory
after each, in one of two modes:

- ``QUARANTINE`` moves damaged bytes into a file under the quarantine directory (for the operator to inspect)
  and keeps every intact unit: the intact ones after the damage move into a new segment named by their first
  offset, and a gap marker (:mod:`regroup.storage.segment_dir`) records the offsets that are lost;
- ``TRUNCATE`` cuts the damaged segment at the first bad unit, discarding everything after it in that file.

Either way **no offset is handed out twice**: the offsets lost are covered by a gap marker, and when the
active segment loses intact units the log continues in a new, empty segment after the highest offset they
held. A torn tail (nothing intact after the bad unit, in the active segment) is simply cut — what the log
does by itself on open — and, in ``QUARANTINE`` mode, kept aside too. Unknown files are moved into the
quarantine directory (never deleted), except a segment whose name was damaged: when its first unit is intact,
it is renamed after that unit's offset. A partition's new segment that a crash left under its temporary name
(``<base>.rolling``) is settled the way opening the log settles it
(:func:`regroup.storage.partition_log.find_left_roll`): renamed to ``<base>.log`` when the segment before it is
whole, removed (``QUARANTINE``: moved into the quarantine directory) when that segment lost its tail; after a
damaged segment it is renamed, and the damage is then repaired like any older segment's.

Each step is written durably before the next (fsync unless ``sync=False``), in an order that a crash can
interrupt: running the repair again finishes the job. The caller holds the directory's lock.
"""

from __future__ import annotations

import enum
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from regroup.storage.damage import Scan, UnitFormat, describe_intact, scan
from regroup.storage.files import CLOEXEC, fsync_dir, fsync_file, read_file, write_file_atomically
from regroup.storage.partition_log import BATCHES, find_left_roll, settle_left_roll
from regroup.storage.segment_dir import ROLLING_RE, gap_name, list_dir, segment_name, write_gap

__all__ = ["Finding", "Mode", "RepairError", "inspect", "repair"]

MAX_STEPS = 10_000
_REPAIR_TMP = re.compile(r"^\d{20}\.(log|gap)\.tmp$")  # what write_file_atomically leaves if interrupted


class Mode(enum.Enum):
    TRUNCATE = "truncate"
    QUARANTINE = "quarantine"


class RepairError(Exception):
    """The directory cannot be repaired automatically; the message says what to do."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: where, what, and what each mode does about it (``None``: no automatic repair)."""

    path: Path
    problem: str
    truncate: str | None
    quarantine: str | None
    #: what the log does by itself on the next open, not damage: a torn tail it cuts, a roll it settles
    torn: bool = False

    def plan(self, mode: Mode) -> str | None:
        return self.truncate if mode is Mode.TRUNCATE else self.quarantine


@dataclass(frozen=True, slots=True)
class _Step:
    finding: Finding
    action: Callable[[Mode], str]


class _Dir:
    """One log directory under repair."""

    def __init__(
        self,
        directory: Path,
        fmt: UnitFormat,
        expected: Callable[[str], bool],
        quarantine: Path,
        sync: bool,
        floor: Callable[[list[str]], int],
    ) -> None:
        self.dir = directory
        self.fmt = fmt
        self.expected = expected
        self.quarantine = quarantine
        self.sync = sync
        self.floor = floor
        self._active_end: int | None = None

    # ------------------------------------------------------------------ finding problems

    def steps(self, *, first_only: bool) -> list[_Step]:
        listing = list_dir(self.dir, self.expected)
        self._active_end = None
        steps = [self._stray(name, listing.segments, listing.gaps) for name in sorted(listing.strays)]
        if steps and first_only:
            return steps[:1]
        both = sorted(set(listing.segments) & set(listing.gaps))
        if both:
            path = self.dir / gap_name(both[0])
            problem = f"both {segment_name(both[0])} and {gap_name(both[0])} exist"
            return [*steps, _Step(Finding(path, problem, None, None), _unfixable)]
        files = listing.files()
        if files and files[-1][1]:
            path = self.dir / gap_name(files[-1][0])
            problem = (
                "the last file is a gap marker, so the active segment is missing and the log's end offset unknown: "
                "restore the segment that followed it"
            )
            steps.append(_Step(Finding(path, problem, None, None), _unfixable))
            if first_only:
                return steps
        for i, (base, is_gap) in enumerate(files):
            if is_gap:
                continue
            next_base = files[i + 1][0] if i + 1 < len(files) else None
            # (with unexpected files about, offsets may only seem missing: a renamed segment holds them)
            step = self._segment(base, next_base, continuity=not listing.strays)
            if step is not None:
                steps.append(step)
                if first_only:
                    return steps
        floor = self.floor(listing.other)
        end = self._active_end
        if end is not None and end < floor:  # (the coordinator log's newest snapshot is ahead of it)
            problem = f"the log ends at offset {end}, but its newest snapshot covers offsets up to {floor - 1}"
            fix = f"continue the log at offset {floor}, recording offsets {end}..{floor - 1} as lost"
            steps.append(_Step(Finding(self.dir, problem, fix, fix), lambda mode: self._continue_at(end, floor)))
        return steps

    def _stray(self, name: str, segments: list[int], gaps: list[int]) -> _Step:
        path = self.dir / name
        if _REPAIR_TMP.match(name):
            fix = "delete it"
            finding = Finding(
                path, "left behind by an interrupted repair (the data it copies is still in place)", fix, fix
            )
            return _Step(finding, lambda mode: self._delete(path))
        if ROLLING_RE.match(name) and self.fmt is BATCHES:
            return self._rolling(path)
        base = None
        if path.is_file() and not path.is_symlink():
            unit = self.fmt.check(read_file(path), 0)
            if not isinstance(unit, str) and unit.base not in segments and unit.base not in gaps:
                base = unit.base
        if base is not None:
            fix = f"rename it to {segment_name(base)} (its first {self.fmt.noun} holds offset {base})"
            finding = Finding(path, "unexpected file that starts like a segment (a damaged name?)", fix, fix)
            return _Step(finding, lambda mode: self._rename(path, base))
        fix = f"move it to {self._quarantine_path(name)}"
        return _Step(Finding(path, "unexpected file", fix, fix), lambda mode: self._move_aside(path))

    def _rolling(self, path: Path) -> _Step:
        """A partition's new segment a crash left under its temporary name (``<base>.rolling``): settled as
        opening the log settles it (:func:`regroup.storage.partition_log.find_left_roll`)."""
        roll = find_left_roll(self.dir)
        assert roll is not None
        problem = f"a new segment whose roll a crash interrupted: {roll.reason}"
        if roll.action == "rename" and roll.path == path:
            fix = f"rename it to {segment_name(roll.base)} (what the server does itself on the next start)"
            finding = Finding(path, problem, fix, fix, torn=True)
            return _Step(finding, lambda mode: settle_left_roll(roll, sync=self.sync))
        if roll.action == "remove" and roll.path == path:
            truncate = "delete it (what the server does itself on the next start)"
            quarantine = f"move it to {self._quarantine_path(path.name)}"
            finding = Finding(path, problem, truncate, quarantine, torn=True)
            return _Step(
                finding,
                lambda mode: (
                    settle_left_roll(roll, sync=self.sync) if mode is Mode.TRUNCATE else self._move_aside(path)
                ),
            )
        if roll.action == "damaged" and roll.path == path:
            # (the server refuses to start; once renamed, the damage is repaired like an older segment's)
            fix = f"rename it to {segment_name(roll.base)}, then repair the segment before it as an older one"
            return _Step(Finding(path, problem, fix, fix), lambda mode: self._rename(path, roll.base))
        return _Step(Finding(path, problem, None, None), _unfixable)

    def _segment(self, base: int, next_base: int | None, *, continuity: bool = True) -> _Step | None:
        path = self.dir / segment_name(base)
        data = read_file(path)
        s = scan(data, base, self.fmt)
        active = next_base is None
        if active:  # where the log ends once a torn tail is cut (unknown yet if it is damaged)
            self._active_end = s.next_offset if s.clean or s.torn else None
        if s.clean:
            if next_base is None or s.next_offset == next_base or not continuity:
                return None
            if s.next_offset > next_base:
                problem = (
                    f"holds offsets up to {s.next_offset - 1}, past the start of the next file (offset {next_base})"
                )
                return _Step(Finding(path, problem, None, None), _unfixable)
            lost = f"offsets {s.next_offset}..{next_base - 1}"
            problem = f"ends at offset {s.next_offset}, but the next file starts at offset {next_base}: {lost} missing"
            fix = f"record {lost} as lost (gap marker {gap_name(s.next_offset)})"
            return _Step(Finding(path, problem, fix, fix), lambda mode: self._mark_missing(path, s, next_base))
        where = f"{s.problem} at byte {s.end} (offset {s.next_offset})"
        if active and s.torn:
            cut = len(data) - s.end
            problem = f"torn tail: {where}, {cut} byte(s), nothing intact after it"
            truncate = f"cut the {cut} byte(s) (what the log does itself on the next start)"
            quarantine = f"move the {cut} byte(s) to {self._quarantine_path(path.name, s.end, len(data))}"
            finding = Finding(path, problem, truncate, quarantine, torn=True)
            return _Step(finding, lambda mode: self._fix_damage(path, data, s, next_base, mode))
        after = describe_intact(s.intact, self.fmt.noun) if s.intact else "nothing intact follows in this file"
        problem = f"{where}; {after}"
        lost_to, keep = self._extent(s, next_base)
        q_end = s.intact[0].pos if s.intact else len(data)
        quarantined = self._quarantine_path(path.name, s.end, q_end)
        truncate = f"cut the file at byte {s.end}: offsets {s.next_offset}..{lost_to} are lost"
        if s.intact and active:
            truncate += f"; the log continues at offset {lost_to + 1}"
        if s.intact:
            kept = s.intact[0].base
            quarantine = f"move bytes {s.end}..{q_end} to {quarantined}; keep {keep} in {segment_name(kept)}"
            if kept > s.next_offset:
                quarantine += f"; offsets {s.next_offset}..{kept - 1} are lost"
        else:
            quarantine = f"move bytes {s.end}..{q_end} to {quarantined}; offsets {s.next_offset}..{lost_to} are lost"
        finding = Finding(path, problem, truncate, quarantine)
        return _Step(finding, lambda mode: self._fix_damage(path, data, s, next_base, mode))

    def _extent(self, s: Scan, next_base: int | None) -> tuple[int, str]:
        """The last offset a truncation loses, and what a quarantine keeps."""
        if s.intact:
            last = s.intact[-1].last if next_base is None else next_base - 1
            return last, f"offsets {s.intact[0].base}..{s.intact[-1].last}"
        return (next_base - 1 if next_base is not None else s.next_offset - 1), ""

    # ------------------------------------------------------------------ fixing

    def _fix_damage(self, path: Path, data: bytes, s: Scan, next_base: int | None, mode: Mode) -> str:
        sync = self.sync
        done: list[str] = []
        q_end = s.intact[0].pos if (s.intact and mode is Mode.QUARANTINE) else len(data)
        if mode is Mode.QUARANTINE and q_end > s.end:
            target = self._quarantine_path(path.name, s.end, q_end)
            target.parent.mkdir(parents=True, exist_ok=True)
            write_file_atomically(target, data[s.end : q_end], sync=sync)
            done.append(f"moved bytes {s.end}..{q_end} to {target}")
        # the file that follows the kept prefix, if the log needs a new one
        new_base: int | None = None
        if mode is Mode.QUARANTINE and s.intact and s.end == 0 and s.intact[0].base == s.next_offset:
            # junk before the file's first unit: the file keeps its name, without the junk
            write_file_atomically(path, data[s.intact[0].pos :], sync=sync)
            done.append(f"rewrote {path.name} from byte {s.intact[0].pos}")
            return "; ".join(done)
        if mode is Mode.QUARANTINE and s.intact:
            new_base = s.intact[0].base
            _write_new(self.dir / segment_name(new_base), data[s.intact[0].pos :], sync)
            done.append(f"kept offsets {new_base}..{s.intact[-1].last} in {segment_name(new_base)}")
        elif s.intact and next_base is None:
            new_base = s.intact[-1].last + 1
            _write_new(self.dir / segment_name(new_base), b"", sync)
            done.append(f"the log continues at offset {new_base} in {segment_name(new_base)}")
        following = new_base if new_base is not None else next_base
        needs_gap = following is not None and following > s.next_offset
        lost = f"offsets {s.next_offset}..{following - 1}" if following is not None else ""
        if s.end == 0 and following is not None:
            os.unlink(path)
            if sync:
                fsync_dir(self.dir)
            done.append(f"removed {path.name} (nothing in it was intact from its start)")
        else:
            _truncate(path, s.end, sync)
            done.append(f"cut {path.name} at byte {s.end}")
        if needs_gap:
            how = "moved to the quarantine directory" if mode is Mode.QUARANTINE else "discarded by --truncate"
            note = f"{lost} lost: {s.problem} at byte {s.end} of {path.name}; the damaged bytes were {how}"
            write_gap(self.dir, s.next_offset, note, sync=sync)
            done.append(f"recorded {lost} as lost ({gap_name(s.next_offset)})")
        return "; ".join(done)

    def _mark_missing(self, path: Path, s: Scan, next_base: int) -> str:
        lost = f"offsets {s.next_offset}..{next_base - 1}"
        note = f"{lost} lost: no segment held them (after {path.name})"
        if s.count == 0:  # an empty older segment: the gap marker takes its place
            os.unlink(path)
            if self.sync:
                fsync_dir(self.dir)
        write_gap(self.dir, s.next_offset, note, sync=self.sync)
        return f"recorded {lost} as lost ({gap_name(s.next_offset)})"

    def _continue_at(self, end: int, floor: int) -> str:
        _write_new(self.dir / segment_name(floor), b"", self.sync)
        note = f"offsets {end}..{floor - 1} lost: the log ended before its newest snapshot"
        write_gap(self.dir, end, note, sync=self.sync)
        return f"continued the log at offset {floor} ({segment_name(floor)}, {gap_name(end)})"

    def _delete(self, path: Path) -> str:
        path.unlink()
        return f"deleted {path.name}"

    def _rename(self, path: Path, base: int) -> str:
        target = self.dir / segment_name(base)
        os.rename(path, target)
        if self.sync:
            fsync_dir(self.dir)
        return f"renamed {path.name} to {target.name}"

    def _move_aside(self, path: Path) -> str:
        target = self._quarantine_path(path.name)
        n = 1
        while target.exists():
            target = self._quarantine_path(f"{path.name}.{n}")
            n += 1
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(path), str(target))
        if self.sync:
            fsync_dir(self.dir)
        return f"moved {path.name} to {target}"

    def _quarantine_path(self, name: str, start: int | None = None, end: int | None = None) -> Path:
        return self.quarantine / (name if start is None else f"{name}.bytes-{start}-{end}")


def _unfixable(mode: Mode) -> str:
    raise RepairError("no automatic repair")


def _no_floor(names: list[str]) -> int:
    return 0


def inspect(
    directory: Path,
    fmt: UnitFormat,
    quarantine: Path,
    expected: Callable[[str], bool] = lambda name: False,
    floor: Callable[[list[str]], int] = _no_floor,
) -> list[Finding]:
    """Every problem in the log directory, read-only (a missing directory has none). ``expected``: names the
    directory may hold besides segments and gap markers; ``floor(those names)``: the offset the log must at
    least reach (the coordinator log's newest snapshot + 1)."""
    if not directory.is_dir():
        return []
    return [step.finding for step in _Dir(directory, fmt, expected, quarantine, False, floor).steps(first_only=False)]


def repair(
    directory: Path,
    fmt: UnitFormat,
    mode: Mode,
    quarantine: Path,
    expected: Callable[[str], bool] = lambda name: False,
    floor: Callable[[list[str]], int] = _no_floor,
    *,
    sync: bool = True,
) -> list[str]:
    """Fix the directory's problems one at a time; returns what was done. Raises :class:`RepairError` at the
    first problem without an automatic repair (what was done before it stays done)."""
    done: list[str] = []
    d = _Dir(directory, fmt, expected, quarantine, sync, floor)
    if not directory.is_dir():
        return done
    for _ in range(MAX_STEPS):
        steps = d.steps(first_only=True)
        if not steps:
            return done
        step = steps[0]
        try:
            done.append(f"{step.finding.path}: {step.action(mode)}")
        except RepairError as exc:
            raise RepairError(f"{step.finding.path}: {step.finding.problem}: {exc}") from None
    raise RepairError(f"{directory}: still damaged after {MAX_STEPS} repairs")


def _write_new(path: Path, data: bytes, sync: bool) -> None:
    """Create ``path`` holding ``data``; already there with the same bytes (an interrupted repair run
    again) is fine, with other bytes it is not."""
    if path.exists():
        if read_file(path) == data:
            return
        raise RepairError(f"{path} already exists with other contents")
    write_file_atomically(path, data, sync=sync)


def _truncate(path: Path, size: int, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | CLOEXEC)
    try:
        os.ftruncate(fd, size)
        if sync:
            fsync_file(fd)
    finally:
        os.close(fd)
