"""File primitives both logs (and their repair) share: creating, writing, fsyncing files and directories.

A shell (docs/architecture.md). ``fsync_file`` uses ``F_FULLFSYNC`` on macOS (plain ``fsync`` there does not
flush the drive's cache) and ``fdatasync`` where it exists (enough for appends: a size change is flushed too).
``sync_filesystem`` is Linux's ``syncfs``: everything dirty on one file system flushed with one call, the drive's
cache too, which costs about what one file's fsync costs where many files' fsyncs issued together cost several
(``server/group_sync.py`` chooses between them). It is offered only where a failed write-back is reported by it
(Linux 5.8 and later, through the descriptor it is given: errors since that descriptor was opened).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Callable
from pathlib import Path

if sys.platform != "win32":
    import fcntl

__all__ = [
    "create_file",
    "dirty_bytes",
    "fsync_dir",
    "fsync_file",
    "open_append",
    "open_directory",
    "read_file",
    "rename_once",
    "sync_filesystem",
    "syncs_filesystem",
    "write_all_or_take_back",
    "write_file_atomically",
    "write_file_atomically_in",
    "write_file_in",
]

CLOEXEC = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def create_file(path: Path) -> None:
    """Create the empty file ``path``, which must not exist."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | CLOEXEC, 0o644))


def open_append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | CLOEXEC)


def fsync_file(fd: int) -> None:
    if sys.platform == "darwin":
        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
    elif hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def _syncfs() -> Callable[[int], int] | None:
    """libc's ``syncfs`` where it reports write-back errors (Linux 5.8 and later), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        major, minor = (int(part) for part in os.uname().release.split(".")[:2])
    except ValueError:
        return None
    if (major, minor) < (5, 8):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # (the process's own symbols, libc's among them: no search)
        call: Callable[[int], int] = libc.syncfs
    except (OSError, AttributeError):
        return None
    return call


_SYNCFS = _syncfs()


def syncs_filesystem() -> bool:
    """Whether :func:`sync_filesystem` is available here."""
    return _SYNCFS is not None


def dirty_bytes() -> int | None:
    """How much written data the kernel has yet to write back, on every file system (``Dirty`` and
    ``Writeback`` of ``/proc/meminfo``), or None where that cannot be read: what a :func:`sync_filesystem` may
    have to wait for besides this process's own writes."""
    try:
        with open("/proc/meminfo", "rb") as meminfo:
            text = meminfo.read()
    except OSError:
        return None
    total = 0
    for name in (b"\nDirty:", b"\nWriteback:"):
        at = text.find(name)
        if at < 0:
            return None
        fields = text[at + len(name) : text.find(b"\n", at + 1)].split()
        if len(fields) != 2 or fields[1] != b"kB" or not fields[0].isdigit():
            return None
        total += int(fields[0]) * 1024
    return total


def sync_filesystem(fd: int) -> None:
    """Flush everything written to the file system ``fd`` is on (data, metadata, the drive's cache), or raise
    ``OSError``: a write-back error anywhere on it since ``fd`` was opened (reported once), or no ``syncfs``
    here (:func:`syncs_filesystem`). It releases the interpreter's lock while it waits, as ``os.fsync`` does."""
    if _SYNCFS is None:
        raise OSError("syncfs is not available on this platform")
    if _SYNCFS(fd) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def rename_once(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst`` (which must not exist); done already (``src`` gone, ``dst`` there) is done.
    Two threads may race to do it: one renames, the other finds it done."""
    try:
        os.rename(src, dst)
    except FileNotFoundError:
        if not dst.exists():
            raise


def fsync_dir(directory: Path) -> None:
    """Make file creations/renames in ``directory`` durable (a no-op where directories cannot be opened)."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path: Path) -> bytes:
    """All of ``path`` (read through one descriptor, closed again at once)."""
    fd = os.open(path, os.O_RDONLY | CLOEXEC)
    try:
        parts: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def write_all_or_take_back(
    fd: int,
    data: bytes | bytearray | memoryview | tuple[bytes, ...],
    start: int,
    on_damage: Callable[[BaseException], None],
) -> None:
    """Write all of ``data`` (bytes, or a tuple of pieces written one after another) at the end of ``fd`` (opened with
    O_APPEND, ``start`` bytes long). If a write fails, cut the file back to ``start`` so later appends never
    follow a partial frame; if even that fails, report the original error to ``on_damage`` (the file's state is
    unknown). Re-raises the write error."""
    pieces = data if isinstance(data, tuple) else (data,)
    try:
        for piece in pieces:
            view = memoryview(piece)
            while view:
                view = view[os.write(fd, view) :]
    except BaseException as exc:
        try:
            os.ftruncate(fd, start)
        except OSError:
            on_damage(exc)
        raise


def write_whole_file(path: Path, data: bytes, *, sync: bool) -> None:
    """Create (or truncate) ``path`` and write all of ``data``, fsynced when ``sync``; on any failure the
    file is removed. The caller renames it into place."""
    write_file_in(None, path, data, sync=sync)


def write_file_atomically(path: Path, data: bytes, *, sync: bool) -> None:
    """``path`` holds ``data`` afterwards, whole or (after a crash) not at all: written to ``path.tmp``,
    fsynced, renamed into place, the directory fsynced (no fsyncs unless ``sync``)."""
    tmp = path.with_name(path.name + ".tmp")
    write_whole_file(tmp, data, sync=sync)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def open_directory(path: Path) -> int:
    """``path`` open as a directory: a file written in it through the descriptor
    (``write_file_atomically_in``) lands in that directory, wherever it is renamed meanwhile."""
    return os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | CLOEXEC)


def write_file_in(dir_fd: int | None, name: str | Path, data: bytes, *, sync: bool) -> None:
    """Create (or truncate) the file ``name`` in the directory open as ``dir_fd`` (None: ``name`` is a path) and
    write all of ``data``, fsynced when ``sync``; on any failure the file is removed. The caller renames it into
    place."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            fsync_file(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
        raise
    os.close(fd)


def write_file_atomically_in(dir_fd: int, name: str, data: bytes, *, sync: bool) -> None:
    """As ``write_file_atomically``, for the file ``name`` in the directory open as ``dir_fd``, which it closes
    (whether or not the write succeeds: the descriptor is the write's from the moment it is handed over)."""
    try:
        tmp = name + ".tmp"
        write_file_in(dir_fd, tmp, data, sync=sync)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        if sync:
            os.fsync(dir_fd)  # (as ``fsync_dir``: the rename durable)
    finally:
        os.close(dir_fd)
