"""The files of a segmented log directory, shared by the coordinator log and the partition logs.

A shell (docs/architecture.md). Both logs keep, in one directory::

    00000000000000000000.log    a segment: units (batches or frames) from the offset in its name
    00000000000000000030.gap    a gap marker left by ``regroup repair``: offsets from the one in its name up to
                                the next file's are gone (their bytes were damaged); a line of text says why

plus names the owner expects (the coordinator log's ``LOCK`` and snapshots). :func:`list_dir` sorts these
out; anything else — a stray file, a segment whose name was cut short or mangled — is reported, because a
segment that is not recognised is data silently left out: the logs refuse to open until it is moved away
(``regroup repair`` does that, or renames a mangled segment back when its first unit tells its offset).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from regroup.storage.files import write_file_atomically

__all__ = [
    "GAP_RE",
    "ROLLING_RE",
    "SEGMENT_RE",
    "Listing",
    "gap_name",
    "list_dir",
    "rolling_name",
    "segment_name",
    "write_gap",
]

SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
GAP_RE = re.compile(r"^(\d{20})\.gap$")
ROLLING_RE = re.compile(r"^(\d{20})\.rolling$")


def segment_name(base: int) -> str:
    """File name of the segment whose first unit has offset ``base``."""
    return f"{base:020d}.log"


def rolling_name(base: int) -> str:
    """File name of a partition log's new segment from ``base`` while the segment before it may not be whole on
    disk yet (``regroup.storage.partition_log``: renamed to :func:`segment_name` once it is)."""
    return f"{base:020d}.rolling"


def gap_name(base: int) -> str:
    """File name of the gap marker for the offsets from ``base`` up to the next file's."""
    return f"{base:020d}.gap"


@dataclass(slots=True)
class Listing:
    """A log directory's files, sorted out."""

    segments: list[int] = field(default_factory=list)
    gaps: list[int] = field(default_factory=list)
    #: names neither a segment, a gap marker nor one the owner expects
    strays: list[str] = field(default_factory=list)
    #: the other names the owner expected, as found
    other: list[str] = field(default_factory=list)

    def files(self) -> list[tuple[int, bool]]:
        """``(base, is_gap)`` of every segment and gap marker, by base offset."""
        return sorted([(b, False) for b in self.segments] + [(b, True) for b in self.gaps])

    def problem(self, directory: Path, what: str) -> str | None:
        """Why this listing cannot be opened as-is (strays, a gap marker beside a segment of the same base, a
        gap marker with nothing after it), or ``None``."""
        if self.strays:
            names = ", ".join(sorted(self.strays)[:3]) + (", ..." if len(self.strays) > 3 else "")
            return (
                f"{directory}: unexpected file(s) in {what}: {names} (a segment whose name was damaged, or a stray "
                f"file); nothing in them is served until they are moved away or renamed"
            )
        both = sorted(set(self.segments) & set(self.gaps))
        if both:
            return f"{directory}: {segment_name(both[0])} and {gap_name(both[0])} both exist"
        files = self.files()
        if files and files[-1][1]:
            last = gap_name(files[-1][0])
            return f"{directory}: the last file is the gap marker {last}; the active segment is missing"
        return None


def list_dir(directory: Path, expected: Callable[[str], bool] = lambda name: False) -> Listing:
    """Sort out the entries of ``directory`` (an empty listing if it does not exist)."""
    listing = Listing()
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return listing
    for entry in entries:
        name = entry.name
        if m := SEGMENT_RE.match(name):
            listing.segments.append(int(m.group(1)))
        elif m := GAP_RE.match(name):
            listing.gaps.append(int(m.group(1)))
        elif expected(name):
            listing.other.append(name)
        else:
            listing.strays.append(name)
    listing.segments.sort()
    listing.gaps.sort()
    return listing


def write_gap(directory: Path, base: int, note: str, *, sync: bool) -> Path:
    """Create the gap marker for ``base`` holding the one-line ``note`` (atomically, fsynced unless not ``sync``)."""
    path = directory / gap_name(base)
    write_file_atomically(path, note.rstrip("\n").encode("utf-8", "replace") + b"\n", sync=sync)
    return path
