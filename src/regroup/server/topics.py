"""The embedded topic store: topics, their partition logs on disk, producer ids, and wake-ups for long polls.

Implements the :class:`regroup.server.api.TopicStore` protocol the handlers see. Directory layout (details
and guarantees in ``docs/topic-data.md``)::

    <dir>/LOCK                          flock()ed while a TopicStore has the directory open
    <dir>/producer-ids                  the first producer id not yet reserved (decimal text)
    <dir>/topics/<name>/topic.json      {"name": ..., "topic_id": ..., "partitions": N}
    <dir>/topics/<name>/<p>/*.log       partition p's log (:mod:`regroup.storage.partition_log`)
    <dir>/staging/, <dir>/trash/        topics being created / deleted; emptied on open

Creating a topic builds it under ``staging/`` and renames it into ``topics/``; deleting renames it into
``trash/`` first. Both renames are atomic, so after a crash a topic either exists whole or not at all.
Topic ids are random (uuid4): this is a shell.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from regroup.server.api import TopicInfo
from regroup.storage.format import CorruptLogError
from regroup.storage.partition_log import DEFAULT_SEGMENT_BYTES, PartitionLog, fsync_dir
from regroup.storage.record_log import FsyncPolicy, LogLockedError

if sys.platform != "win32":
    import fcntl

__all__ = ["InvalidTopicError", "TopicExistsError", "TopicStore", "validate_topic_name"]

MAX_NAME_LENGTH = 249
PRODUCER_ID_BLOCK = 1000
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


class InvalidTopicError(ValueError):
    """An illegal topic name (Kafka's INVALID_TOPIC_EXCEPTION)."""


class TopicExistsError(ValueError):
    """The topic already exists (Kafka's TOPIC_ALREADY_EXISTS)."""


def validate_topic_name(name: str) -> None:
    """Kafka's rules (``org.apache.kafka.common.internals.Topic.validate``); raises :class:`InvalidTopicError`."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f'Topic name cannot be "{name}"')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL.match(name):
        legal = "ASCII alphanumerics, '.', '_' and '-'"
        raise InvalidTopicError(f'Topic name "{name}" is illegal, it contains a character other than {legal}')


class TopicStore:
    """Topics and partition logs under one directory; open it with :meth:`TopicStore.open`.

    Not thread-safe: the server's event loop owns it. ``wait_for_append`` needs a running event loop; all
    other methods are plain synchronous calls.
    """

    def __init__(
        self, directory: Path, lock_fd: int | None, fsync: FsyncPolicy, segment_bytes: int, fsync_interval_ms: float
    ) -> None:
        """Internal: use :meth:`TopicStore.open`."""
        self._dir = directory
        self._lock_fd = lock_fd
        self._fsync = fsync
        self._segment_bytes = segment_bytes
        self._interval_ms = fsync_interval_ms
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, str] = {}
        self._logs: dict[str, list[PartitionLog]] = {}
        self._waiters: dict[tuple[str, int], set[asyncio.Future[None]]] = {}
        self._next_pid = self._reserved_pid = 0
        self._closed = False
        #: called after every topic created or deleted (the server refreshes the coordinator's cluster image)
        self.on_change: Callable[[], None] | None = None

    @classmethod
    def open(
        cls,
        directory: Path | str,
        *,
        fsync: FsyncPolicy = FsyncPolicy.ALWAYS,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync_interval_ms: float = 100,
    ) -> TopicStore:
        """Open (creating if needed) the store in ``directory`` and recover every partition log.

        ``fsync`` applies to every partition: with ``ALWAYS`` an append made for a produce with acks ≠ 0 is on
        stable storage before the handler answers (see ``docs/topic-data.md``).
        """
        directory = Path(directory)
        for sub in ("topics", "staging", "trash"):
            (directory / sub).mkdir(parents=True, exist_ok=True)
        lock_fd = _lock(directory)
        store = cls(directory, lock_fd, fsync, segment_bytes, fsync_interval_ms)
        try:
            for sub in ("staging", "trash"):
                for entry in os.scandir(directory / sub):
                    shutil.rmtree(entry.path, ignore_errors=True)
            pid_file = directory / "producer-ids"
            if pid_file.exists():
                store._next_pid = store._reserved_pid = int(pid_file.read_text(encoding="ascii").strip() or 0)
            for entry in sorted(os.scandir(directory / "topics"), key=lambda e: e.name):
                store._load(Path(entry.path))
        except BaseException:
            store.close()
            raise
        return store

    # ------------------------------------------------------------------ the api.TopicStore protocol

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def create_topic(self, name: str, partitions: int) -> TopicInfo:
        """Create ``name`` with ``partitions`` empty partitions (durably, unless the policy is ``NEVER``).

        Raises :class:`InvalidTopicError` for an illegal name or one that collides with an existing topic once
        '.' and '_' are treated alike (Kafka forbids both, as its metric names would clash),
        :class:`TopicExistsError`, and ``ValueError`` for ``partitions < 1``.
        """
        self._check_open()
        self.check_new_topic(name)
        if partitions < 1:
            raise ValueError(f"a topic needs at least one partition, not {partitions}")
        info = TopicInfo(name=name, topic_id=uuid.uuid4(), partitions=partitions)
        staging = self._dir / "staging" / info.topic_id.hex  # (a name + suffix could pass NAME_MAX)
        staging.mkdir()
        meta = {"name": name, "topic_id": str(info.topic_id), "partitions": partitions}
        (staging / "topic.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")
        for p in range(partitions):
            (staging / str(p)).mkdir()
        if self._sync_enabled:
            _fsync_path(staging / "topic.json")
            fsync_dir(staging)
        final = self._dir / "topics" / name
        os.rename(staging, final)
        if self._sync_enabled:
            fsync_dir(final.parent)
        self._load(final)
        self._changed()
        return info

    def delete_topic(self, name: str) -> bool:
        """Delete ``name`` and its data; ``False`` if there is no such topic. Long polls on it wake up."""
        self._check_open()
        info = self._topics.pop(name, None)
        if info is None:
            return False
        del self._by_id[info.topic_id]
        for plog in self._logs.pop(name):
            plog.listener = None
            plog.close()
        trash = self._dir / "trash" / info.topic_id.hex
        os.rename(self._dir / "topics" / name, trash)
        if self._sync_enabled:
            fsync_dir(self._dir / "topics")
        shutil.rmtree(trash, ignore_errors=True)
        for p in range(info.partitions):
            self._wake((name, p))
        self._changed()
        return True

    # ------------------------------------------------------------------ more for the handlers

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        name = self._by_id.get(topic_id)
        return None if name is None else self._topics[name]

    def partition(self, name: str, index: int) -> PartitionLog | None:
        """The log of partition ``index`` of ``name``, or ``None`` if either does not exist."""
        logs = self._logs.get(name)
        return logs[index] if logs is not None and 0 <= index < len(logs) else None

    def check_new_topic(self, name: str) -> None:
        """What :meth:`create_topic` checks about the name (for CreateTopics' validate_only)."""
        validate_topic_name(name)
        if name in self._topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        folded = name.replace(".", "_")
        for other in self._topics:
            if other.replace(".", "_") == folded:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, not even before a restart: ids are reserved in blocks whose
        end is persisted (atomically, fsynced) before any id of the block is used."""
        self._check_open()
        if self._next_pid >= self._reserved_pid:
            reserved = self._next_pid + PRODUCER_ID_BLOCK
            path = self._dir / "producer-ids"
            tmp = path.with_name("producer-ids.tmp")
            tmp.write_text(f"{reserved}\n", encoding="ascii")
            if self._fsync is not FsyncPolicy.NEVER:
                _fsync_path(tmp)
            os.replace(tmp, path)
            if self._fsync is not FsyncPolicy.NEVER:
                fsync_dir(self._dir)
            self._reserved_pid = reserved
        pid = self._next_pid
        self._next_pid += 1
        return pid

    async def wait_for_append(self, partitions: Iterable[tuple[str, int]], timeout_s: float) -> bool:
        """Wait until one of ``partitions`` gets an append (or is deleted) or ``timeout_s`` passes; ``True``
        if woken. Register before the caller yields to the event loop, so no append can slip in between."""
        keys = list(partitions)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            for key in keys:
                waiting = self._waiters.get(key)
                if waiting is not None:
                    waiting.discard(future)
                    if not waiting:
                        del self._waiters[key]

    def sync(self) -> None:
        """fsync every partition's unsynced appends (an owner using ``INTERVAL`` may call this on a timer)."""
        for logs in self._logs.values():
            for plog in logs:
                plog.sync()

    def close(self) -> None:
        """Close every partition log (fsyncing, unless ``NEVER``) and release the directory. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            for logs in self._logs.values():
                for plog in logs:
                    plog.close()
        finally:
            self._logs.clear()
            for waiting in self._waiters.values():
                for future in waiting:
                    if not future.done():
                        future.set_result(None)
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> TopicStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    @property
    def _sync_enabled(self) -> bool:
        return self._fsync is not FsyncPolicy.NEVER

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the topic store is closed")

    def _load(self, path: Path) -> None:
        try:
            meta = json.loads((path / "topic.json").read_text(encoding="utf-8"))
            info = TopicInfo(
                name=meta["name"], topic_id=uuid.UUID(meta["topic_id"]), partitions=int(meta["partitions"])
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptLogError(f"{path}: unreadable topic metadata: {exc}") from exc
        if info.name != path.name or info.partitions < 1:
            raise CorruptLogError(f"{path}: topic metadata does not match its directory: {meta}")
        logs: list[PartitionLog] = []
        self._logs[info.name] = logs
        for p in range(info.partitions):
            plog = PartitionLog.open(
                path / str(p),
                fsync=self._fsync,
                segment_bytes=self._segment_bytes,
                fsync_interval_ms=self._interval_ms,
            )
            plog.listener = _Waker(self, (info.name, p))
            logs.append(plog)
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info.name

    def _wake(self, key: tuple[str, int]) -> None:
        for future in self._waiters.pop(key, ()):
            if not future.done():
                future.set_result(None)


class _Waker:
    """A partition log's listener: wakes the long polls waiting on that partition."""

    __slots__ = ("key", "store")

    def __init__(self, store: TopicStore, key: tuple[str, int]) -> None:
        self.store = store
        self.key = key

    def __call__(self) -> None:
        self.store._wake(self.key)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _lock(directory: Path) -> int | None:
    if sys.platform == "win32":
        return None
    fd = os.open(directory / "LOCK", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogLockedError(f"{directory} is already open by another TopicStore") from None
    return fd
