"""The rebalance timeline's durable rows (docs/operations.md, "Rebalance timeline"): the server's event-log rows,
one JSON object per line, in numbered segment files of one directory, kept for a window of time and within a
byte budget, read back in order when the server starts to rebuild the timeline (``regroup.history``).

A shell (docs/architecture.md). Appends are written and flushed to the operating system but not fsynced: a
process that dies loses nothing it appended, a machine that crashes may lose the rows of its last seconds (what
the operating system had not yet written), and a line it tore is skipped when the rows are read. Each process
writes segments of its own (it never appends to a segment found at start, whose last line may be torn). A
segment is deleted whole: when its newest row is older than the window, and the oldest ones while the
directory holds more than ``max_bytes``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import orjson

SUFFIX = ".jsonl"
#: how much of a segment's end is read to find its newest row (a segment written by another process)
_TAIL_BYTES = 1 << 16


def _segment_number(path: Path) -> int | None:
    stem = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else ""
    return int(stem) if stem.isdigit() and len(stem) == 12 else None


def _row_time(line: bytes) -> int | None:
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    t = row.get("t") if isinstance(row, dict) else None
    return t if type(t) is int else None


def read_rows(paths: Sequence[Path]) -> Iterator[dict[str, Any]]:
    """The rows of the segment files ``paths``, in order, from any thread: a file gone or unreadable (pruned
    meanwhile) is passed over, and so is a line that is not a JSON object (torn by a crash, or still being
    written)."""
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(row, dict):
                yield row


class HistoryLog:
    """Rows appended to ``directory``'s segments (``000000000001.jsonl``, ...), read back by ``load``.

    ``skipped_lines`` counts the lines the last ``load`` skipped (torn, not JSON, not an object);
    ``unreadable_segments`` the segments it could not read at all."""

    def __init__(
        self,
        directory: Path,
        window_ms: int,
        *,
        max_bytes: int = 256 * 2**20,
        segment_bytes: int = 16 * 2**20,
    ) -> None:
        self.directory = directory
        self.window_ms = window_ms
        self.max_bytes = max_bytes
        self.segment_bytes = max(1, min(segment_bytes, max_bytes))
        self.skipped_lines = 0
        self.unreadable_segments = 0
        directory.mkdir(parents=True, exist_ok=True)
        #: segment number -> [size in bytes, newest row time or None: not known yet], oldest first
        self._segments: dict[int, list[int | None]] = {}
        for path in sorted(directory.iterdir()):
            number = _segment_number(path)
            if number is not None and path.is_file():
                self._segments[number] = [path.stat().st_size, None]
        self._segments = dict(sorted(self._segments.items()))
        self._file: IO[bytes] | None = None
        self._current: int | None = None  # the segment this process appends to

    # ------------------------------------------------------------------------------------------- writing
    def append(self, rows: Sequence[Mapping[str, Any]], now_ms: int) -> None:
        """Append ``rows`` (a row that is not JSON-serialisable is left out): ``append_lines`` of their lines."""
        lines: list[bytes] = []
        newest = now_ms
        for row in rows:
            try:
                lines.append(orjson.dumps(row) + b"\n")
            except TypeError:
                continue
            t = row.get("t")
            if type(t) is int and t > newest:
                newest = t
        self.append_lines(lines, newest)

    def append_lines(self, lines: Sequence[bytes], newest_ms: int) -> None:
        """Append ``lines`` (rows as JSON objects, each line ending with its newline; an item may hold several),
        whose newest row is of ``newest_ms``, rolling to a new segment at ``segment_bytes``, then delete the
        oldest segments beyond ``max_bytes``."""
        if not lines:
            return
        data = b"".join(lines)
        current = self._current
        if (
            self._file is None
            or current is None
            or (self._size(current) > 0 and self._size(current) + len(data) > self.segment_bytes)
        ):
            self._roll()
        assert self._file is not None and self._current is not None
        self._file.write(data)
        self._file.flush()
        entry = self._segments[self._current]
        entry[0] = self._size(self._current) + len(data)
        entry[1] = max(entry[1] or newest_ms, newest_ms)
        self._within_bytes()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    # ------------------------------------------------------------------------------------------- reading
    def load(self, now_ms: int) -> Iterator[dict[str, Any]]:
        """Every row of every segment whose newest row is within the window, in the order they were
        appended; a line that is not a JSON object is skipped and counted (``skipped_lines``), a segment that
        cannot be read is skipped and counted (``unreadable_segments``). Never raises for a bad file."""
        self.skipped_lines = 0
        self.unreadable_segments = 0
        cutoff = now_ms - self.window_ms
        for number in list(self._segments):
            if number == self._current:
                continue  # (this process's own rows: already observed)
            newest = self._newest(number)
            if newest is not None and newest < cutoff:
                continue
            try:
                data = self._path(number).read_bytes()
            except OSError:
                self.unreadable_segments += 1
                continue
            for line in data.split(b"\n"):
                if not line.strip():
                    continue
                try:
                    row = orjson.loads(line)
                except orjson.JSONDecodeError:
                    self.skipped_lines += 1
                    continue
                if not isinstance(row, dict):
                    self.skipped_lines += 1
                    continue
                yield row

    # ------------------------------------------------------------------------------------------ pruning
    def prune(self, now_ms: int) -> None:
        """Delete the segments whose newest row is older than ``now_ms - window_ms`` (the one being written
        too: the next append starts a new one), and the oldest ones beyond ``max_bytes``."""
        cutoff = now_ms - self.window_ms
        for number in list(self._segments):
            newest = self._newest(number)
            if newest is not None and newest < cutoff:
                self._delete(number)
        self._within_bytes()

    def segments(self) -> list[Path]:
        """The segment files, oldest first."""
        return [self._path(n) for n in self._segments]

    def total_bytes(self) -> int:
        return sum(self._size(n) for n in self._segments)

    # ---------------------------------------------------------------------------------------- internals
    def _path(self, number: int) -> Path:
        return self.directory / f"{number:012d}{SUFFIX}"

    def _size(self, number: int) -> int:
        size = self._segments[number][0]
        return size or 0

    def _roll(self) -> None:
        self.close()
        number = (max(self._segments) if self._segments else 0) + 1
        self._file = self._path(number).open("ab")
        self._segments[number] = [0, None]
        self._current = number

    def _delete(self, number: int) -> None:
        if number == self._current:
            self.close()
            self._current = None
        del self._segments[number]
        with contextlib.suppress(OSError):  # (gone already, or not ours to delete: forgotten all the same)
            os.unlink(self._path(number))

    def _within_bytes(self) -> None:
        while len(self._segments) > 1 and self.total_bytes() > self.max_bytes:
            self._delete(next(iter(self._segments)))
        if self._segments and self.total_bytes() > self.max_bytes:  # (one segment over the budget alone)
            self._delete(next(iter(self._segments)))

    def _newest(self, number: int) -> int | None:
        """The time of the segment's newest row: known for this process's own segments, read from the end of
        a segment found at start (None: none of its last lines has a time)."""
        entry = self._segments[number]
        if entry[1] is None and number != self._current:
            try:
                with self._path(number).open("rb") as fh:
                    size = fh.seek(0, os.SEEK_END)
                    fh.seek(max(0, size - _TAIL_BYTES))
                    tail = fh.read()
            except OSError:
                return None
            times = [t for t in (_row_time(line) for line in tail.split(b"\n")) if t is not None]
            entry[1] = max(times) if times else None
        return entry[1]
