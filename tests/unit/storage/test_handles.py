"""The handle cache: least recently used first out, owners settle before a close, running out of descriptors
frees half the cache and retries, and the capacity follows the process's descriptor limit."""

from __future__ import annotations

import errno
import os
import resource
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regroup.storage import handles as handles_module
from regroup.storage.handles import MIN_CAPACITY, HandleCache, capacity_for_limit


def opener(path: Path) -> int:
    return os.open(path, os.O_RDONLY)


def is_open(fd: int, path: Path) -> bool:
    """``fd`` is open on ``path`` (descriptor numbers are reused, so the file is compared too)."""
    try:
        return os.fstat(fd).st_ino == path.stat().st_ino
    except OSError:
        return False


def test_least_recently_used_handle_is_closed_first(tmp_path: Path) -> None:
    paths = [tmp_path / f"f{i}" for i in range(4)]
    for p in paths:
        p.write_bytes(b"x")
    cache = HandleCache(2)
    settled: list[str] = []
    a = cache.get("a", lambda: opener(paths[0]), lambda fd: settled.append("a"))
    b = cache.get("b", lambda: opener(paths[1]), lambda fd: settled.append("b"))
    assert cache.get("a", lambda: pytest.fail("a is cached")) == a  # a is now the most recent
    c = cache.get("c", lambda: opener(paths[2]))
    assert settled == ["b"] and not is_open(b, paths[1]) and is_open(a, paths[0]) and is_open(c, paths[2])
    assert "b" not in cache and len(cache) == 2
    cache.forget("a")  # closed without settling
    assert settled == ["b"] and not is_open(a, paths[0])
    cache.discard("zzz")
    cache.close()
    assert not is_open(c, paths[2]) and len(cache) == 0 and (cache.opened, cache.closed) == (3, 3)


def test_a_failing_settle_still_closes(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    cache = HandleCache(1)

    def boom(fd: int) -> None:
        raise OSError(errno.EIO, "fsync failed")

    fd = cache.get("a", lambda: opener(tmp_path / "f"), boom)
    cache.discard("a")
    assert not is_open(fd, tmp_path / "f")


def test_out_of_descriptors_frees_half_the_cache_and_retries(tmp_path: Path) -> None:
    paths = [tmp_path / f"f{i}" for i in range(6)]
    for p in paths:
        p.write_bytes(b"x")
    (tmp_path / "f").write_bytes(b"x")
    cache = HandleCache(10)
    fds = [cache.get(i, lambda i=i: opener(paths[i])) for i in range(6)]
    calls = [0]

    def flaky() -> int:
        calls[0] += 1
        if calls[0] == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        return opener(tmp_path / "f")

    cache.get("new", flaky)
    assert calls[0] == 2 and len(cache) == 4  # 6 cached, 3 closed, 1 added
    assert [is_open(fd, p) for fd, p in zip(fds, paths, strict=True)] == [False] * 3 + [True] * 3
    with pytest.raises(OSError, match="No such file"):  # any other error is the caller's
        cache.get("missing", lambda: opener(tmp_path / "missing"))
    empty = HandleCache(2)
    with pytest.raises(OSError):  # nothing to free: the error stands
        empty.get("x", lambda: (_ for _ in ()).throw(OSError(errno.EMFILE, "Too many open files")))
    cache.close()


@given(st.lists(st.integers(0, 7), max_size=60), st.integers(1, 4))
def test_never_more_than_capacity_open(keys: list[int], capacity: int) -> None:
    """Against a model: the cache holds the ``capacity`` most recently used distinct keys."""
    cache = HandleCache(capacity)
    recent: list[int] = []
    try:
        for key in keys:
            cache.get(key, lambda: os.open(os.devnull, os.O_RDONLY))
            if key in recent:
                recent.remove(key)
            recent.append(key)
            recent = recent[-capacity:]
            assert len(cache) <= capacity
            assert all(k in cache for k in recent) and len(cache) == len(recent)
    finally:
        cache.close()


def test_capacity_follows_the_descriptor_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 4096))
    assert capacity_for_limit(256) == 256 and capacity_for_limit(1000) == 256
    monkeypatch.setattr(resource, "getrlimit", lambda which: (12, 12))
    assert capacity_for_limit(256) == MIN_CAPACITY
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert capacity_for_limit(256) == 256
    with pytest.raises(ValueError):
        handles_module.HandleCache(0)
