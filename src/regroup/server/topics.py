"""The embedded topic store: topics, their partition logs on disk, producer ids, and wake-ups for long polls.

Implements the :class:`regroup.server.api.TopicStore` protocol the handlers see. Directory layout (details
and guarantees in ``docs/topic-data.md``)::

    <dir>/LOCK                          flock()ed while a TopicStore has the directory open
    <dir>/producer-ids                  the first producer id not yet reserved (decimal text)
    <dir>/topics/<name>/topic.json      {"name": ..., "topic_id": ..., "partitions": N}
    <dir>/topics/<name>/<p>/*.log       partition p's log (:mod:`regroup.storage.partition_log`), once written
    <dir>/staging/, <dir>/trash/        topics being created / deleted; emptied on open

Creating a topic writes its ``topic.json`` under ``staging/`` and renames the directory into ``topics/``:
one file and one atomic rename, whatever the partition count, so after a crash or a failure (a full disk, no
descriptors left) a topic either exists whole or not at all. Adding partitions (CreatePartitions) writes the
new ``topic.json`` under ``staging/`` and renames it over the old one: the topic has the old count or the new
one, never a mix. A partition's directory appears with its first append. Deleting renames the topic into
``trash/`` first. Topic ids are random (uuid4): this is a shell.

Partition logs are opened (and recovered) one at a time when the store opens, and hold no file descriptor
between uses: they share one :class:`~regroup.storage.handles.HandleCache`, so the open files stay bounded
however many partitions there are. A partition never written gets its (empty) log object on first use.
The store enforces the partition limits (per topic, and in total) on every creation, explicit or automatic.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import ClassVar

from kio.schema.errors import ErrorCode

from regroup.server.api import TopicInfo
from regroup.server.topic_configs import TopicConfigs, expected_in_topic_dir
from regroup.storage.format import CorruptLogError, StorageError
from regroup.storage.handles import DEFAULT_CAPACITY, HandleCache
from regroup.storage.partition_log import PartitionLog, fsync_dir
from regroup.storage.record_log import FsyncPolicy, lock_directory
from regroup.storage.topic_config import DEFAULT_MESSAGE_MAX_BYTES, DEFAULT_SEGMENT_BYTES, BrokerLogDefaults

__all__ = [
    "DEFAULT_MAX_PARTITIONS",
    "DEFAULT_MAX_PARTITIONS_PER_TOPIC",
    "InvalidTopicError",
    "PartitionLimitError",
    "TooManyPartitionsError",
    "TopicExistsError",
    "TopicStore",
    "TotalPartitionsError",
    "UnknownTopicError",
    "validate_topic_name",
]

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 249
DEFAULT_MAX_PARTITIONS_PER_TOPIC = 10_000
DEFAULT_MAX_PARTITIONS = 100_000
PRODUCER_ID_BLOCK = 1000
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


class InvalidTopicError(ValueError):
    """An illegal topic name (Kafka's INVALID_TOPIC_EXCEPTION)."""


class TopicExistsError(ValueError):
    """The topic already exists (Kafka's TOPIC_ALREADY_EXISTS)."""


class UnknownTopicError(ValueError):
    """No topic has that name (Kafka's UNKNOWN_TOPIC_OR_PARTITION)."""


class PartitionLimitError(ValueError):
    """Creating the topic (or its new partitions) would break a partition limit; nothing was created.
    ``code``: Kafka's answer."""

    code: ClassVar[ErrorCode]


class TooManyPartitionsError(PartitionLimitError):
    """More partitions than one topic may have."""

    code = ErrorCode.invalid_partitions


class TotalPartitionsError(PartitionLimitError):
    """The broker would hold more partitions in total than allowed."""

    code = ErrorCode.policy_violation


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
        self,
        directory: Path,
        lock_fd: int | None,
        fsync: FsyncPolicy,
        segment_bytes: int,
        fsync_interval_ms: float,
        handles: HandleCache,
        max_partitions_per_topic: int,
        max_partitions: int,
    ) -> None:
        """Internal: use :meth:`TopicStore.open`."""
        self._dir = directory
        self._lock_fd = lock_fd
        self._fsync = fsync
        self._segment_bytes = segment_bytes
        self._interval_ms = fsync_interval_ms
        self._handles = handles
        self.max_partitions_per_topic = max_partitions_per_topic
        self.max_partitions = max_partitions
        self._partition_total = 0
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, str] = {}
        #: each topic's name with '.' read as '_' (Kafka refuses a new name that collides with one this way)
        self._folded: dict[str, str] = {}
        #: each topic's partition logs; ``None`` until a partition is first used
        self._logs: dict[str, list[PartitionLog | None]] = {}
        self._unsynced: set[PartitionLog] = set()
        self._waiters: dict[tuple[str, int], set[asyncio.Future[None]]] = {}
        self._next_pid = self._reserved_pid = 0
        self._closed = False
        #: each topic's configuration overrides (``config.json``) and the broker defaults behind them
        self.configs = TopicConfigs(BrokerLogDefaults(segment_bytes=segment_bytes), sync=fsync is not FsyncPolicy.NEVER)
        #: called after every topic created, grown or deleted (the server refreshes the coordinator's cluster image)
        self.on_change: Callable[[], None] | None = None
        #: counts the topics' changes (created, grown, deleted): what was derived from the topics at one
        #: generation still holds while it is the same (``server/topic_answers.py``)
        self.generation = 0
        self._batching = 0  # inside batched(): on_change waits for its end
        self._change_pending = False

    @classmethod
    def open(
        cls,
        directory: Path | str,
        *,
        fsync: FsyncPolicy = FsyncPolicy.ALWAYS,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync_interval_ms: float = 100,
        open_files: int = DEFAULT_CAPACITY,
        max_partitions_per_topic: int = DEFAULT_MAX_PARTITIONS_PER_TOPIC,
        max_partitions: int = DEFAULT_MAX_PARTITIONS,
        message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES,
    ) -> TopicStore:
        """Open (creating if needed) the store in ``directory`` and recover every partition log.

        ``fsync`` applies to every partition: with ``ALWAYS`` an append made for a produce with acks ≠ 0 is on
        stable storage before the handler answers (see ``docs/topic-data.md``). ``open_files``: the most
        segment files held open at once (the handle cache). The limits apply to topics created from now on;
        topics already on disk load whatever their size. Damage recovery must not cut away raises
        :class:`~regroup.storage.format.CorruptLogError`.
        """
        if min(open_files, max_partitions_per_topic, max_partitions) < 1:
            raise ValueError("open_files and the partition limits must be positive")
        directory = Path(directory)
        for sub in ("topics", "staging", "trash"):
            (directory / sub).mkdir(parents=True, exist_ok=True)
        lock_fd = _lock(directory)
        store = cls(directory, lock_fd, fsync, segment_bytes, fsync_interval_ms, HandleCache(open_files),
                    max_partitions_per_topic, max_partitions)  # fmt: skip
        store.configs = TopicConfigs(
            BrokerLogDefaults(message_max_bytes, segment_bytes), sync=fsync is not FsyncPolicy.NEVER
        )
        try:
            for sub in ("staging", "trash"):  # directories of interrupted creations, files of partition counts
                for entry in os.scandir(directory / sub):
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        Path(entry.path).unlink(missing_ok=True)
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

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None) -> TopicInfo:
        """Create ``name`` with ``partitions`` empty partitions (durably, unless the policy is ``NEVER``) and the
        configuration overrides ``configs`` (checked already: ``topic_config.validate_topic_configs``).

        Raises :class:`InvalidTopicError` for an illegal name or one that collides with an existing topic once
        '.' and '_' are treated alike (Kafka forbids both, as its metric names would clash),
        :class:`TopicExistsError`, :class:`TooManyPartitionsError` / :class:`TotalPartitionsError` over the
        limits, and ``ValueError`` for ``partitions < 1``. If writing fails (``OSError``) nothing was created:
        the staging directory is removed again (or on the next open).
        """
        self._check_open()
        if partitions < 1:
            raise ValueError(f"a topic needs at least one partition, not {partitions}")
        self.check_new_topic(name, partitions)
        info = TopicInfo(name=name, topic_id=uuid.uuid4(), partitions=partitions)
        staging = self._dir / "staging" / info.topic_id.hex  # (a name + suffix could pass NAME_MAX)
        final = self._dir / "topics" / name
        meta = {"name": name, "topic_id": str(info.topic_id), "partitions": partitions}
        try:
            staging.mkdir()
            (staging / "topic.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")
            self.configs.write_new(staging, name, configs or {})
            if self._sync_enabled:
                _fsync_path(staging / "topic.json")
                fsync_dir(staging)
            os.rename(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if self._sync_enabled:
            try:
                fsync_dir(final.parent)
            except BaseException:  # the topic's name may not be durable: take it back, do not acknowledge it
                self._take_back(final, info)
                raise
        self.configs.adopt(name, configs or {})
        self._register(info)
        self._changed()
        return info

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        """Grow ``name`` to ``count`` partitions, the new ones empty (durably, unless the policy is ``NEVER``).

        Raises :class:`UnknownTopicError`, ``ValueError`` when ``count`` is not more than the topic has, and
        :class:`TooManyPartitionsError` / :class:`TotalPartitionsError` over the limits; then nothing changed.
        The topic's ``topic.json`` is replaced by one rename (everything else it records is kept), so a crash
        leaves the old count or the new one. If writing fails (``OSError``) before that rename, nothing
        changed; if only the final directory fsync fails, the store follows what the directory shows (the new
        count) and the error is raised, so the change is not acknowledged.
        """
        self._check_open()
        info = self.check_new_partitions(name, count)
        path = self._dir / "topics" / name / "topic.json"
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["partitions"] = count
        staged = self._dir / "staging" / f"{info.topic_id.hex}.json"
        try:
            staged.write_text(json.dumps(meta) + "\n", encoding="utf-8")
            if self._sync_enabled:
                _fsync_path(staged)
            os.replace(staged, path)
        except BaseException:
            staged.unlink(missing_ok=True)
            raise
        grown = TopicInfo(name=name, topic_id=info.topic_id, partitions=count)
        self._topics[name] = grown
        self._logs[name].extend([None] * (count - info.partitions))
        self._partition_total += count - info.partitions
        try:
            if self._sync_enabled:
                fsync_dir(path.parent)
        finally:
            self._changed()
        return grown

    def delete_topic(self, name: str) -> bool:
        """Delete ``name`` and its data; ``False`` if there is no such topic. Long polls on it wake up."""
        self._check_open()
        info = self._topics.pop(name, None)
        if info is None:
            return False
        del self._by_id[info.topic_id]
        if self._folded.get(name.replace(".", "_")) == name:
            del self._folded[name.replace(".", "_")]
        self.configs.forget(name)
        self._partition_total -= info.partitions
        for plog in self._logs.pop(name):
            if plog is not None:
                plog.listener = None
                self._unsynced.discard(plog)
                plog.close()
        trash = self._dir / "trash" / info.topic_id.hex
        os.rename(self._dir / "topics" / name, trash)
        if self._sync_enabled:
            fsync_dir(self._dir / "topics")
        shutil.rmtree(trash, ignore_errors=True)
        for key in [key for key in self._waiters if key[0] == name]:
            self._wake(key)
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
        if logs is None or not 0 <= index < len(logs):
            return None
        plog = logs[index]
        if plog is None:  # never written since the store opened: an empty log, no file yet
            plog = logs[index] = self._open_partition(name, index)
        return plog

    def opened_partition(self, name: str, index: int) -> PartitionLog | bool:
        """Partition ``index`` of ``name`` without opening it: its log if opened, ``True`` if it exists but was
        never opened (never written: an empty log without files, all of its offsets 0), ``False`` if either
        does not exist. (ListOffsets over thousands of partitions need not open thousands of empty logs.)"""
        logs = self._logs.get(name)
        if logs is None or not 0 <= index < len(logs):
            return False
        plog = logs[index]
        return True if plog is None else plog

    def loaded_partitions(self) -> Iterator[tuple[tuple[str, int], PartitionLog]]:
        """``((topic, partition), log)`` of every partition log opened so far — all those with data on disk
        are opened when the store opens."""
        for name, logs in self._logs.items():
            for p, plog in enumerate(logs):
                if plog is not None:
                    yield (name, p), plog

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the overrides of topic ``name`` (checked already) durably, and apply them to its logs."""
        self._check_open()
        if name not in self._topics:
            raise KeyError(name)
        self.configs.replace(self._dir / "topics" / name, name, configs)
        policy = self.configs.policy(name)
        for plog in self.opened_partitions(name):
            plog.configure(max_batch_bytes=policy.max_message_bytes, segment_bytes=policy.segment_bytes)

    def opened_partitions(self, name: str) -> list[PartitionLog]:
        """The partition logs of ``name`` in use (those never touched since the store opened have no data)."""
        return [plog for plog in self._logs.get(name, ()) if plog is not None]

    @property
    def partition_count(self) -> int:
        """Partitions of all topics."""
        return self._partition_total

    @property
    def open_files(self) -> int:
        """Segment files open right now (at most :attr:`open_files_max`)."""
        return len(self._handles)

    @property
    def open_files_max(self) -> int:
        """The handle cache's capacity."""
        return self._handles.capacity

    def check_new_topic(self, name: str, partitions: int | None = None) -> None:
        """What :meth:`create_topic` checks about the name and, given ``partitions``, the limits (for
        CreateTopics' validate_only)."""
        validate_topic_name(name)
        if name in self._topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        other = self._folded.get(name.replace(".", "_"))
        if other is not None:
            raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")
        if partitions is None:
            return
        if partitions > self.max_partitions_per_topic:
            raise TooManyPartitionsError(
                f"Number of partitions {partitions} is above the limit of {self.max_partitions_per_topic} per topic "
                "(regroup serve --max-partitions-per-topic)."
            )
        if self._partition_total + partitions > self.max_partitions:
            raise TotalPartitionsError(
                f"Creating {partitions} partition(s) would bring the broker to {self._partition_total + partitions} "
                f"partitions, above its limit of {self.max_partitions} (regroup serve --max-partitions)."
            )

    def check_new_partitions(self, name: str, count: int) -> TopicInfo:
        """What :meth:`add_partitions` checks (for CreatePartitions' validate_only); returns the topic as it is."""
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        if count <= info.partitions:
            raise ValueError(f"Topic '{name}' has {info.partitions} partition(s); {count} is not more.")
        if count > self.max_partitions_per_topic:
            raise TooManyPartitionsError(
                f"Number of partitions {count} is above the limit of {self.max_partitions_per_topic} per topic "
                "(regroup serve --max-partitions-per-topic)."
            )
        added = count - info.partitions
        if self._partition_total + added > self.max_partitions:
            raise TotalPartitionsError(
                f"Adding {added} partition(s) would bring the broker to {self._partition_total + added} "
                f"partitions, above its limit of {self.max_partitions} (regroup serve --max-partitions)."
            )
        return info

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
        """fsync every partition's unsynced appends (an owner using ``INTERVAL`` calls this on a timer). A
        partition whose fsync fails is logged and left failed (its appends refuse until the next start)."""
        while self._unsynced:
            plog = self._unsynced.pop()
            try:
                plog.sync()
            except (OSError, StorageError) as exc:
                log.error("%s: fsync failed: %s", plog.directory, exc)

    def close(self) -> None:
        """Close every partition log (fsyncing, unless ``NEVER``) and release the directory. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            for logs in self._logs.values():
                for plog in logs:
                    if plog is not None:
                        plog.close()
        finally:
            self._logs.clear()
            self._unsynced.clear()
            self._handles.close()
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

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """Changes made inside call ``on_change`` once, at the end (as Kafka's controller publishes one request's
        topic changes in one metadata delta): a request creating or deleting many topics hands the coordinator
        one new cluster image, not one per topic."""
        self._batching += 1
        try:
            yield
        finally:
            self._batching -= 1
            if not self._batching and self._change_pending:
                self._change_pending = False
                if self.on_change is not None:
                    self.on_change()

    def _changed(self) -> None:
        self.generation += 1
        if self._batching:
            self._change_pending = True
        elif self.on_change is not None:
            self.on_change()

    @property
    def _sync_enabled(self) -> bool:
        return self._fsync is not FsyncPolicy.NEVER

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the topic store is closed")

    def _load(self, path: Path) -> None:
        """Load a topic from disk: its metadata, and each partition directory there is, one at a time."""
        try:
            meta = json.loads((path / "topic.json").read_text(encoding="utf-8"))
            info = TopicInfo(
                name=meta["name"], topic_id=uuid.UUID(meta["topic_id"]), partitions=int(meta["partitions"])
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptLogError(f"{path}: unreadable topic metadata: {exc}") from exc
        if info.name != path.name or info.partitions < 1:
            raise CorruptLogError(f"{path}: topic metadata does not match its directory: {meta}")
        self.configs.load(path, info.name)
        logs = self._register(info)
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            if entry.name == "topic.json" or expected_in_topic_dir(entry.name):
                continue
            p = int(entry.name) if entry.name.isdigit() and entry.name == str(int(entry.name)) else -1
            if not 0 <= p < info.partitions:
                raise CorruptLogError(
                    f"{entry.path}: unexpected file in a topic of {info.partitions} partition(s); nothing in it is "
                    "served until it is moved away"
                )
            logs[p] = self._open_partition(info.name, p)

    def _take_back(self, final: Path, info: TopicInfo) -> None:
        """Undo a creation whose last step failed; if even that fails the topic stays (it exists on disk)."""
        trash = self._dir / "trash" / info.topic_id.hex
        try:
            os.rename(final, trash)
        except OSError:
            self._register(info)
            return
        shutil.rmtree(trash, ignore_errors=True)

    def _register(self, info: TopicInfo) -> list[PartitionLog | None]:
        self.generation += 1
        logs: list[PartitionLog | None] = [None] * info.partitions
        self._logs[info.name] = logs
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info.name
        self._folded[info.name.replace(".", "_")] = info.name
        self._partition_total += info.partitions
        return logs

    def _open_partition(self, name: str, p: int) -> PartitionLog:
        plog = PartitionLog.open(
            self._dir / "topics" / name / str(p),
            fsync=self._fsync,
            segment_bytes=self._segment_bytes,
            fsync_interval_ms=self._interval_ms,
            handles=self._handles,
        )
        policy = self.configs.policy(name)
        plog.configure(max_batch_bytes=policy.max_message_bytes, segment_bytes=policy.segment_bytes)
        plog.listener = _Waker(self, (name, p), plog if self._fsync is FsyncPolicy.INTERVAL else None)
        return plog

    def _wake(self, key: tuple[str, int]) -> None:
        for future in self._waiters.pop(key, ()):
            if not future.done():
                future.set_result(None)


class _Waker:
    """A partition log's listener: wakes the long polls waiting on that partition (and, under ``INTERVAL``,
    puts the log on the list of those :meth:`TopicStore.sync` fsyncs)."""

    __slots__ = ("key", "plog", "store")

    def __init__(self, store: TopicStore, key: tuple[str, int], plog: PartitionLog | None) -> None:
        self.store = store
        self.key = key
        self.plog = plog

    def __call__(self) -> None:
        if self.plog is not None:
            self.store._unsynced.add(self.plog)
        if self.key in self.store._waiters:
            self.store._wake(self.key)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _lock(directory: Path) -> int | None:
    return lock_directory(directory, "TopicStore")
