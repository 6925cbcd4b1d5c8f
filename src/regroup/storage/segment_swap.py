"""Replacing a run of a partition's older segments by one rewritten file, so that a crash at any step leaves
either the old segments or the new one — and the partition's other small files (the log start offset).

A shell (docs/architecture.md). Compaction rewrites the segments ``[b0, b1, ..., bk]`` (offsets ``b0`` up to
the next file's base ``N``) into one file covering exactly the same offsets, in these steps:

1. write ``<b0>.cleaned`` and fsync it (:func:`write_cleaned`) — a crash here leaves a stray ``.cleaned``
   file, deleted on open;
2. rename it to ``<b0>.swap`` (:func:`commit_swap`) and fsync the directory: **the commit point**. From here
   on the new file is the truth; its batches cover offsets ``b0`` to ``N - 1`` without a hole, so ``N`` is
   read from its last batch. (A crash after the rename but before the directory's fsync leaves either name:
   the old segments or the new file, each a whole log.)
3. delete the segments ``b1 .. bk`` (those with a base in ``(b0, N)``), then rename ``<b0>.swap`` over
   ``<b0>.log`` (:func:`settle_swap`) — never the other way round: ``<b0>.log`` covering ``N - 1`` beside a
   segment it overlaps would be damage at the next start, while a ``.swap`` beside them is finished. Once the
   commit is durable, ``<b0>.log`` itself may be deleted first too (the server does, so that the rename frees
   no blocks): a sound ``.swap`` is finished whether or not it is there.

:func:`swap_in` runs them all at once. The server runs them apart, so that its event loop does no file work
but the renames (``PartitionLog.replace_segments`` and ``start_rewrite``): step 1 and, in step 3, the
directory's fsync and the deletions on a worker thread; the renames on the loop, each together with the
change of the log in memory that it goes with. :func:`recover` runs when a partition log opens, before
anything else: it deletes ``.cleaned`` files and finishes every ``.swap`` whose batches are sound (steps 3),
or deletes a ``.swap`` that is not (which only a crash under ``--fsync never`` can leave, while the old
segments are still complete). Running it again after a crash inside it finishes the job.

The log start offset a DeleteRecords sets lives in ``log-start-offset`` (decimal text, replaced atomically).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from regroup.storage.batches import check_batch
from regroup.storage.files import fsync_dir, read_file, write_file_atomically, write_whole_file
from regroup.storage.segment_dir import SEGMENT_RE, segment_name

__all__ = [
    "LOG_START_FILE",
    "commit_swap",
    "expected_name",
    "read_log_start",
    "recover",
    "settle_swap",
    "swap_in",
    "write_cleaned",
    "write_log_start",
    "write_log_start_up",
]

LOG_START_FILE = "log-start-offset"
_CLEANED_RE = re.compile(r"^(\d{20})\.cleaned$")
_SWAP_RE = re.compile(r"^(\d{20})\.swap$")
_LOG_START_TMP = LOG_START_FILE + ".tmp"


def expected_name(name: str) -> bool:
    """Names a partition directory may hold besides segments and gap markers."""
    return name in (LOG_START_FILE, _LOG_START_TMP) or bool(_CLEANED_RE.match(name) or _SWAP_RE.match(name))


def cleaned_name(base: int) -> str:
    return f"{base:020d}.cleaned"


def swap_name(base: int) -> str:
    return f"{base:020d}.swap"


def covered_end(data: bytes, base: int) -> int | None:
    """The offset after the last batch of ``data`` if its batches are all sound and cover the offsets from
    ``base`` without a hole; ``None`` otherwise."""
    pos, expected = 0, base
    while pos < len(data):
        checked = check_batch(data, pos)
        if isinstance(checked, str) or checked.base_offset != expected:
            return None
        pos, expected = pos + checked.size, checked.last_offset + 1
    return expected if pos > 0 else None


def write_cleaned(directory: Path, base: int, data: bytes, *, sync: bool) -> Path:
    """Step 1: ``<base>.cleaned`` holding ``data``, fsynced when ``sync`` (any thread); its path."""
    cleaned = directory / cleaned_name(base)
    write_whole_file(cleaned, data, sync=sync)
    return cleaned


def commit_swap(directory: Path, base: int) -> Path:
    """Step 2 but the directory's fsync: rename ``<base>.cleaned`` to ``<base>.swap``; the latter's path."""
    swap = directory / swap_name(base)
    os.replace(directory / cleaned_name(base), swap)
    return swap


def settle_swap(directory: Path, base: int) -> Path:
    """The end of step 3, once the segments the swap replaces are gone: rename ``<base>.swap`` over
    ``<base>.log``; the latter's path."""
    final = directory / segment_name(base)
    os.replace(directory / swap_name(base), final)
    return final


def swap_in(directory: Path, base: int, data: bytes, replaced: list[int], *, sync: bool) -> Path:
    """Replace the segments ``replaced`` (bases, ``base`` first) by ``data`` (batches covering the same
    offsets), crash-safely as the module doc says, all at once. Returns the new segment's path."""
    if not replaced or replaced[0] != base:
        raise ValueError(f"the run to replace must start at {base}: {replaced}")
    write_cleaned(directory, base, data, sync=sync)
    commit_swap(directory, base)
    if sync:
        fsync_dir(directory)
    return _finish(directory, base, replaced[1:], sync)


def _finish(directory: Path, base: int, others: list[int], sync: bool) -> Path:
    for other in others:
        (directory / segment_name(other)).unlink(missing_ok=True)
    final = settle_swap(directory, base)
    if sync:
        fsync_dir(directory)
    return final


def recover(directory: Path, *, sync: bool) -> list[str]:
    """Finish or undo what an interrupted :func:`swap_in` left in ``directory``; what was done, one line each."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    done: list[str] = []
    for name in sorted(names):
        if _CLEANED_RE.match(name) or name == _LOG_START_TMP:
            (directory / name).unlink(missing_ok=True)
            done.append(f"deleted {name} (an interrupted write)")
    for name in sorted(names):
        m = _SWAP_RE.match(name)
        if not m:
            continue
        base = int(m.group(1))
        swap = directory / name
        end = covered_end(read_file(swap), base)
        if end is None:
            swap.unlink()
            done.append(f"deleted {name}: not complete, the segments it was to replace are kept")
            continue
        others = sorted(
            int(sm.group(1)) for other in names if (sm := SEGMENT_RE.match(other)) and base < int(sm.group(1)) < end
        )
        _finish(directory, base, others, sync)
        done.append(f"finished replacing {len(others) + 1} segment(s) from offset {base} by {segment_name(base)}")
    return done


def read_log_start(directory: Path) -> int:
    """The log start offset a DeleteRecords stored, or 0."""
    path = directory / LOG_START_FILE
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: unreadable: {exc}") from None
    if not text.isdigit():
        raise ValueError(f"{path}: not an offset: {text[:40]!r}")
    return int(text)


def write_log_start(directory: Path, offset: int, *, sync: bool) -> None:
    write_file_atomically(directory / LOG_START_FILE, f"{offset}\n".encode("ascii"), sync=sync)


def write_log_start_up(directory: Path, offset: int, *, sync: bool) -> None:
    """``write_log_start`` unless ``log-start-offset`` holds ``offset`` or more already: the log start never moves
    down, whatever order two DeleteRecords' writes of one partition come in (made on one thread, one at a
    time). An unreadable file is written over."""
    try:
        if read_log_start(directory) >= offset:
            return
    except ValueError:
        pass
    write_log_start(directory, offset, sync=sync)
