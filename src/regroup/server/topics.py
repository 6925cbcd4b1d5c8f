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

A request creating many topics reserves their names first (:meth:`TopicStore.reserve_topic`: a reserved name
is taken for other creations but is no topic yet: Metadata, Produce and auto-creation do not see it), has the
disk work done on the store's worker thread (:meth:`TopicStore.create_reserved`: the same staging directory and
one rename per topic, one fsync of ``topics/`` per chunk) and registers each chunk on the event loop once its
directories are in place. A directory renamed into ``topics/`` but never registered (the server stopped in
between, before answering) is loaded as a topic at the next open, like any other. A request deleting many
topics renames them into ``trash/`` on the event loop as one topic's deletion does (memory and ``topics/``
agree at every turn), and makes the renames durable and empties ``trash/`` on the worker thread
(:meth:`TopicStore.detach_topic`, :meth:`TopicStore.settle_deletes`). Closing the store stops the worker after
the topic it is writing and waits for it.

Partition logs are opened (and recovered) one at a time when the store opens, and hold no file descriptor
between uses: they share one :class:`~regroup.storage.handles.HandleCache`, so the open files stay bounded
however many partitions there are. A partition never written gets its (empty) log object on first use.
Their fsyncs run on the worker threads of the store's group commit (``server/group_sync.py``) under either
policy that has them: under ``ALWAYS`` for every produce, under ``INTERVAL`` on the store's own timer (armed by
the first append after it last fired: every partition appended to since in one round) and on
:meth:`TopicStore.sync`; without a running event loop they run inline.
The store enforces the partition limits (per topic, and in total) on every creation, explicit or automatic.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from kio.schema.errors import ErrorCode

from regroup.server.api import TopicInfo
from regroup.server.group_sync import GroupSync, run_each
from regroup.server.time_slices import TimeSlices
from regroup.server.topic_configs import CONFIG_FILE, TopicConfigs, expected_in_topic_dir
from regroup.storage.files import open_directory, write_file_atomically_in, write_file_in
from regroup.storage.format import CorruptLogError, StorageError
from regroup.storage.handles import DEFAULT_CAPACITY, HandleCache
from regroup.storage.partition_log import PartitionLog, fsync_dir, make_files
from regroup.storage.record_log import FsyncPolicy, lock_directory
from regroup.storage.segment_swap import write_log_start_up
from regroup.storage.topic_config import DEFAULT_MESSAGE_MAX_BYTES, DEFAULT_SEGMENT_BYTES, BrokerLogDefaults

__all__ = [
    "DEFAULT_MAX_PARTITIONS",
    "DEFAULT_MAX_PARTITIONS_PER_TOPIC",
    "FILES_ASIDE_MIN",
    "InvalidTopicError",
    "LogStartWrite",
    "NewTopic",
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
#: one write of a new log start offset (``TopicStore.write_log_starts``): the partition's directory, the offset,
#: whether the write is fsynced
LogStartWrite = tuple[Path, int, bool]
DEFAULT_MAX_PARTITIONS_PER_TOPIC = 10_000
DEFAULT_MAX_PARTITIONS = 100_000
PRODUCER_ID_BLOCK = 1000
#: the store's work on the loop over many partitions (closing a deleted topic's logs, noting the files made for
#: a Produce's new partitions) gives the loop a turn every this long
SLICE_S = 0.005
#: more detached logs than this are closed from the next turn of the loop on, not in the one that detached them
#: (detaching a topic of 10,000 partitions takes a few milliseconds of its own)
CLOSED_AT_ONCE = 500
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


#: a write (a Produce, a transaction's markers) first to at least this many partitions never written has their
#: files made on the store's worker thread before it appends (``TopicStore.make_files``: about 0.05 ms each on
#: the loop, and far more on a busy disk)
FILES_ASIDE_MIN = 16


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


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic whose name is reserved (:meth:`TopicStore.reserve_topic`) and whose creation is under way."""

    info: TopicInfo
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Written:
    """What the worker thread did for one reserved topic: ``on_disk`` (its directory is in ``topics/``) and the
    error, if any. On disk with an error: written, but not durably, and it could not be taken back (the topic
    stays, unacknowledged, as :meth:`TopicStore.create_topic` leaves it). Neither: not attempted (closing)."""

    on_disk: bool
    error: OSError | None = None


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
        #: under ``INTERVAL`` on a running loop: the timer fsyncing ``_unsynced`` (armed by the first append after
        #: the last one fired, so no record waits longer than the interval and a round takes every partition)
        self._sync_timer: asyncio.TimerHandle | None = None
        self._waiters: dict[tuple[str, int], set[asyncio.Future[None]]] = {}
        self._next_pid = self._reserved_pid = 0
        #: the next block of producer ids being reserved on ``_pid_writer``'s thread: its end and the write
        self._next_block: tuple[int, concurrent.futures.Future[None]] | None = None
        self._pid_writer: concurrent.futures.ThreadPoolExecutor | None = None  # (its thread, from the first)
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
        #: names reserved by creations under way (name -> partitions), and their '.'-as-'_' forms
        self._reserved: dict[str, int] = {}
        self._reserved_folded: dict[str, str] = {}
        self._reserved_partitions = 0
        #: the worker thread of the disk work done off the event loop (created on first use)
        self._disk: concurrent.futures.ThreadPoolExecutor | None = None
        #: held by a configuration alteration from reading a topic's overrides until its write is done
        #: (``write_topic_configs``)
        self.config_lock = asyncio.Lock()
        #: held by a CreatePartitions from checking a topic's new count until its ``topic.json`` is written
        #: (``grow_partitions``)
        self.grow_lock = asyncio.Lock()
        self._disk_stop = threading.Event()  # set by close(): the worker attempts no more topics
        self._group_sync: GroupSync | None = None
        #: logs of topics deleted (``detach_topic``) not closed yet: ``settle_deletes`` closes them
        self._detached_logs: list[PartitionLog] = []

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
        final = self._write_topic_dir(info, configs or {})
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
        """Grow ``name`` to ``count`` partitions, the new ones empty (durably, unless the policy is ``NEVER``),
        all of it on the calling thread (the server's handler uses :meth:`grow_partitions`).

        Raises :class:`UnknownTopicError`, ``ValueError`` when ``count`` is not more than the topic has, and
        :class:`TooManyPartitionsError` / :class:`TotalPartitionsError` over the limits; then nothing changed.
        The topic's ``topic.json`` is replaced by one rename (everything else it records is kept), so a crash
        leaves the old count or the new one. If writing fails (``OSError``) before that rename, nothing
        changed; if only the final directory fsync fails, the store follows what the directory shows (the new
        count) and the error is raised, so the change is not acknowledged.
        """
        info, job = self._plan_growth(name, count)
        error = job()
        grown = self._grown(info, count)
        if error is not None:
            raise error
        return grown

    def grow_partitions(self, name: str, count: int) -> tuple[TopicInfo, asyncio.Future[OSError | None]]:
        """:meth:`add_partitions` with its file work on the worker thread: checked here (raising as it does),
        ``topic.json`` replaced on the thread through the topic's directory held open (a topic deleted meanwhile,
        even made again under its name, keeps its own file), the new count taken in the future's first
        callback on the event loop once renamed, if the topic is still the same. The topic as it was, and the
        future: it fails when nothing changed, and gives the final directory fsync's error (the count taken,
        not to be acknowledged) or None. Taken once renamed whether or not anyone still waits; the caller
        serialises growths until the future is done (``grow_lock``: a count checked against a topic another
        growth is still writing would undo that growth)."""
        info, job = self._plan_growth(name, count)
        try:
            written = asyncio.get_running_loop().run_in_executor(self._executor(), job)
        except BaseException:
            job.close()
            raise

        def take(done: asyncio.Future[OSError | None]) -> None:
            if not done.cancelled() and done.exception() is None and self._topics.get(name) is info:
                self._grown(info, count)

        written.add_done_callback(take)
        return info, written

    def _plan_growth(self, name: str, count: int) -> tuple[TopicInfo, _GrowTopicFile]:
        self._check_open()
        info = self.check_new_partitions(name, count)
        topic_fd = open_directory(self._dir / "topics" / name)
        try:
            staging_fd = open_directory(self._dir / "staging")
        except BaseException:
            os.close(topic_fd)
            raise
        return info, _GrowTopicFile(topic_fd, staging_fd, f"{info.topic_id.hex}.json", count, self._sync_enabled)

    def _grown(self, info: TopicInfo, count: int) -> TopicInfo:
        """Take ``info``'s topic to ``count`` partitions (its ``topic.json`` says so now)."""
        grown = TopicInfo(name=info.name, topic_id=info.topic_id, partitions=count)
        self._topics[info.name] = grown
        self._logs[info.name].extend([None] * (count - info.partitions))
        self._partition_total += count - info.partitions
        self._changed()
        return grown

    def delete_topic(self, name: str) -> bool:
        """Delete ``name`` and its data; ``False`` if there is no such topic. Long polls on it wake up."""
        trash = self.detach_topic(name)
        if trash is None:
            return False
        self._close_detached_logs()
        if self._sync_enabled:
            fsync_dir(self._dir / "topics")
        shutil.rmtree(trash, ignore_errors=True)
        return True

    def detach_topic(self, name: str) -> Path | None:
        """The part of :meth:`delete_topic` done on the event loop: forget ``name`` and rename its directory
        into ``trash/`` (one rename); returns that directory, or ``None`` if there is no such topic. Its logs are
        closed, the rename durable and the data gone once :meth:`settle_deletes` is done (the caller answers
        after it)."""
        self._check_open()
        info = self._topics.pop(name, None)
        if info is None:
            return None
        del self._by_id[info.topic_id]
        if self._folded.get(name.replace(".", "_")) == name:
            del self._folded[name.replace(".", "_")]
        self.configs.forget(name)
        self._partition_total -= info.partitions
        detached = [plog for plog in self._logs.pop(name) if plog is not None]
        for plog in detached:
            plog.listener = None
        self._unsynced.difference_update(detached)
        self._detached_logs += detached  # (closed by settle_deletes, in slices: a topic may have 10,000)
        trash = self._dir / "trash" / info.topic_id.hex
        try:
            os.rename(self._dir / "topics" / name, trash)
        finally:
            for key in [key for key in self._waiters if key[0] == name]:
                self._wake(key)
            self._changed()
        return trash

    def _close_detached_logs(self) -> None:
        closing, self._detached_logs = self._detached_logs, []
        for plog in closing:
            plog.close(discard=True)

    async def settle_deletes(self, trash: Sequence[Path]) -> None:
        """Close the logs of the topics :meth:`detach_topic` took out (in slices, without fsyncing them), make
        the renames durable (one fsync of ``topics/``, on the worker thread) and then remove ``trash`` there,
        without waiting for that (``trash/`` is emptied on open anyway).
        Raises ``OSError`` when the fsync fails: the deletions are then not durable."""
        closing, self._detached_logs = self._detached_logs, []
        closing.reverse()  # (taken from the end: each log is let go as it is closed, below)
        slices = TimeSlices(SLICE_S)
        try:
            if len(closing) > CLOSED_AT_ONCE:  # (the turn that detached them has worked enough)
                await slices.turn()
            while closing:
                plog = closing.pop()
                plog.close(discard=True)  # (its data goes: appends not on disk yet are not fsynced)
                del plog  # freed here, in this slice: 10,000 closed logs freed at once held the loop 25 ms
                await slices.tick()
        finally:  # (cancelled: the rest are closed by the next deletion or the store's close)
            self._detached_logs.extend(reversed(closing))
        if not trash:
            return
        self._check_open()
        loop = asyncio.get_running_loop()
        if self._sync_enabled:
            await loop.run_in_executor(self._executor(), fsync_dir, self._dir / "topics")
        if not self._closed:
            self._executor().submit(_remove_trees, list(trash), self._disk_stop)

    async def make_files(self, wanted: Sequence[tuple[PartitionLog, tuple[Path, Path]]]) -> None:
        """Make the files the first appends to never-written logs would make (each log with its
        ``PartitionLog.unmade_files``, as the caller found them) on the worker thread, then tell each log made: a
        Produce to thousands of new partitions creates none of their directories on the event loop. A log whose
        files could not be made (its topic deleted meanwhile, a disk error) is left to its first append, which
        fails as it would have; one written meanwhile keeps what its append made (nothing is made over it)."""
        if not wanted or self._closed:
            return
        loop = asyncio.get_running_loop()
        jobs = [files for _, files in wanted]
        raised = await loop.run_in_executor(self._executor(), run_each, make_files, jobs, OSError)
        slices = TimeSlices(SLICE_S)
        for (plog, _), error in zip(wanted, raised, strict=True):
            if error is None:
                plog.files_made()
            await slices.tick()

    async def write_log_starts(self, jobs: Sequence[LogStartWrite]) -> list[OSError | None]:
        """Write each partition's new log start offset (``PartitionLog.plan_log_start``) to its
        ``log-start-offset``, durably, on the worker thread, one after another (a partition's file never moves
        down: ``write_log_start_up``); what each write raised, None when it was written. ``jobs``: each the
        partition's directory, the offset and whether the write is fsynced (``PartitionLog.syncs_log_start``),
        made by the caller as it walks the partitions, so that no step makes thousands of them at once."""
        if not jobs:
            return []
        self._check_open()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor(), run_each, _write_log_start_up, jobs, OSError)

    # ------------------------------------------------------------------ creating topics off the event loop

    def reserve_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None) -> NewTopic:
        """Reserve ``name`` for a creation under way: checked as :meth:`create_topic` checks it (same errors),
        then taken (a reserved name is refused by :meth:`check_new_topic` as an existing one, and counts
        towards the partition limit) but not a topic yet. Create it with :meth:`create_reserved`, or give it
        back with :meth:`release`."""
        self._check_open()
        if partitions < 1:
            raise ValueError(f"a topic needs at least one partition, not {partitions}")
        self.check_new_topic(name, partitions)
        self._reserved[name] = partitions
        self._reserved_folded[name.replace(".", "_")] = name
        self._reserved_partitions += partitions
        return NewTopic(TopicInfo(name=name, topic_id=uuid.uuid4(), partitions=partitions), dict(configs or {}))

    def release(self, topic: NewTopic) -> None:
        """Give back a reservation (whether or not the topic was created meanwhile). Idempotent."""
        name = topic.info.name
        partitions = self._reserved.pop(name, None)
        if partitions is None:
            return
        self._reserved_partitions -= partitions
        if self._reserved_folded.get(name.replace(".", "_")) == name:
            del self._reserved_folded[name.replace(".", "_")]

    def is_reserved(self, name: str) -> bool:
        """Is ``name`` being created (reserved, not yet a topic)?"""
        return name in self._reserved

    async def create_reserved(self, topics: Sequence[NewTopic]) -> list[TopicInfo | OSError]:
        """Create the reserved ``topics``: their directories written and renamed into ``topics/`` on the
        worker thread (one fsync of ``topics/`` for them all), then registered on the event loop (one change:
        one new cluster image) and their reservations released. Per topic, its ``TopicInfo`` or the
        ``OSError`` that kept it from being created (durably).

        The registration happens even if the caller is cancelled meanwhile (a connection closed): the topics
        on disk are the store's topics. Only a store closed first skips it (the next open loads them)."""
        self._check_open()
        loop = asyncio.get_running_loop()
        job = loop.run_in_executor(self._executor(), self._write_reserved, list(topics))
        return await asyncio.shield(loop.create_task(self._register_written(job, list(topics))))

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
        """Replace the overrides of topic ``name`` (checked already) durably, and apply them to its logs, all of
        it on the calling thread (the server's handler uses :meth:`write_topic_configs`)."""
        self._check_open()
        if name not in self._topics:
            raise KeyError(name)
        dir_fd = open_directory(self._dir / "topics" / name)
        write_file_atomically_in(dir_fd, CONFIG_FILE, self.configs.encoded(configs), sync=self.configs.syncs)
        self._configs_written(name, configs)

    def write_topic_configs(self, name: str, configs: Mapping[str, str]) -> asyncio.Future[None] | None:
        """Replace the overrides of topic ``name`` by ``configs`` (checked already): its ``config.json`` written
        durably on the worker thread, through its directory held open (a topic deleted meanwhile, even made again
        under the same name, keeps its own file), then, in the future's first callback on the event loop, the
        overrides applied to its logs, if the topic is still the same (``topic(name)`` the same object). None if
        there is no such topic. The future fails with the write's error. Applied once written whether or not
        anyone still waits (the file and the store never disagree); the caller serialises alterations of a
        topic until the future is done (``config_lock``: one computed from the overrides another is still
        writing would lose that other's change)."""
        self._check_open()
        info = self._topics.get(name)
        if info is None:
            return None
        dir_fd = open_directory(self._dir / "topics" / name)
        try:
            written = asyncio.get_running_loop().run_in_executor(
                self._executor(),
                functools.partial(write_file_atomically_in, dir_fd, CONFIG_FILE, sync=self.configs.syncs),
                self.configs.encoded(configs),
            )
        except BaseException:
            os.close(dir_fd)
            raise

        def apply(done: asyncio.Future[None]) -> None:
            if not done.cancelled() and done.exception() is None and self._topics.get(name) is info:
                self._configs_written(name, configs)

        written.add_done_callback(apply)
        return written

    def _configs_written(self, name: str, configs: Mapping[str, str]) -> None:
        """Topic ``name``'s ``config.json`` holds ``configs`` now: the store and its logs follow them."""
        self.configs.adopt(name, configs)
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
        CreateTopics' validate_only). A name reserved by a creation under way counts as an existing topic."""
        validate_topic_name(name)
        if name in self._topics or name in self._reserved:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        folded = name.replace(".", "_")
        other = self._folded.get(folded) or self._reserved_folded.get(folded)
        if other is not None:
            raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")
        if partitions is None:
            return
        if partitions > self.max_partitions_per_topic:
            raise TooManyPartitionsError(
                f"Number of partitions {partitions} is above the limit of {self.max_partitions_per_topic} per topic "
                "(regroup serve --max-partitions-per-topic)."
            )
        if self._partition_total + self._reserved_partitions + partitions > self.max_partitions:
            total = self._partition_total + self._reserved_partitions + partitions
            raise TotalPartitionsError(
                f"Creating {partitions} partition(s) would bring the broker to {total} "
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
        if self._partition_total + self._reserved_partitions + added > self.max_partitions:
            total = self._partition_total + self._reserved_partitions + added
            raise TotalPartitionsError(
                f"Adding {added} partition(s) would bring the broker to {total} "
                f"partitions, above its limit of {self.max_partitions} (regroup serve --max-partitions)."
            )
        return info

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, not even before a restart: ids are reserved in blocks whose
        end is persisted (atomically, fsynced) before any id of the block is used. Once half of a block is
        handed out, the next block's end is written on a thread of its own, so the event loop finds the block
        ready; it writes one itself only when that write is not done yet (waiting for it first, one small write
        on a thread of its own: the file's value only grows) or failed."""
        self._check_open()
        self._adopt_next_block(wait=self._next_pid >= self._reserved_pid)
        if self._next_pid >= self._reserved_pid:
            reserved = self._next_pid + PRODUCER_ID_BLOCK
            _write_producer_ids(self._dir, reserved, self._fsync is not FsyncPolicy.NEVER)
            self._reserved_pid = reserved
        pid = self._next_pid
        self._next_pid += 1
        if self._next_block is None and self._reserved_pid - self._next_pid <= PRODUCER_ID_BLOCK // 2:
            reserved = self._reserved_pid + PRODUCER_ID_BLOCK
            sync = self._fsync is not FsyncPolicy.NEVER
            if self._pid_writer is None:
                self._pid_writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="producer-ids")
            job = self._pid_writer.submit(_write_producer_ids, self._dir, reserved, sync)
            self._next_block = (reserved, job)
        return pid

    def _adopt_next_block(self, *, wait: bool) -> None:
        """The next block's end, once its write is done (``wait``: waiting for it); a failed write is dropped
        (the loop writes the block itself, and raises what that write raises)."""
        if self._next_block is None:
            return
        reserved, job = self._next_block
        if not wait and not job.done():
            return
        self._next_block = None
        try:
            job.result()
        except (OSError, concurrent.futures.CancelledError) as exc:
            log.warning("reserving producer ids up to %d ahead failed: %s", reserved, exc)
            return
        self._reserved_pid = max(self._reserved_pid, reserved)

    async def wait_for_append(self, partitions: Iterable[tuple[str, int]], timeout_s: float) -> bool:
        """Wait until one of ``partitions`` gets an append (or is deleted) or ``timeout_s`` passes; ``True``
        if woken. Register before the caller yields to the event loop, so no append can slip in between."""
        waiter = self.append_waiter(partitions)
        try:
            return await waiter.wait(timeout_s)
        finally:
            waiter.close()

    def append_waiter(self, partitions: Iterable[tuple[str, int]]) -> AppendWaiter:
        """Be woken by the next append to one of ``partitions`` (or their deletion) from now on: a long poll
        whose reads give the loop turns registers before its first turn, so an append meanwhile wakes it."""
        return AppendWaiter(self._waiters, list(partitions))

    def sync(self) -> None:
        """fsync every partition's unsynced appends (under ``INTERVAL`` on a running loop the store's own timer
        calls this): on the group commit's worker threads when called on a running event loop (it returns at
        once, the fsyncs follow, in one round), else here. A partition whose fsync fails is logged and left
        failed (its appends refuse until the next start)."""
        while self._unsynced:
            self._sync_partition(self._unsynced.pop())

    def _sync_later(self, plog: PartitionLog) -> None:
        """Under ``INTERVAL``: ``plog`` has appends not fsynced yet. On a running loop they are fsynced when the
        store's timer next fires (armed now if it is not: within the interval); a synchronous owner fsyncs here
        once the log's interval has passed, and otherwise when it calls :meth:`sync`."""
        self._unsynced.add(plog)
        if self._sync_timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            if plog.sync_due:
                self._unsynced.discard(plog)
                self._sync_partition(plog)
            return
        self._sync_timer = loop.call_later(self._interval_ms / 1000.0, self._timer_sync)

    def _timer_sync(self) -> None:
        self._sync_timer = None
        if not self._closed:
            self.sync()

    def _sync_partition(self, plog: PartitionLog) -> None:
        """fsync ``plog``'s unsynced appends off the loop if there is one running, else inline."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            try:
                plog.sync()
            except (OSError, StorageError) as exc:
                log.error("%s: fsync failed: %s", plog.directory, exc)
            return
        self.group_sync.schedule(plog)

    @property
    def group_sync(self) -> GroupSync:
        """The group commit of this store's partition logs' fsyncs (made on first use)."""
        if self._group_sync is None:
            self._group_sync = GroupSync(self._dir)
            for _, plog in self.loaded_partitions():  # (a synchronous owner, fsyncing inline, makes none)
                plog.group_commit = True
        return self._group_sync

    def close(self) -> None:
        """Close every partition log (fsyncing, unless ``NEVER``) and release the directory. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._sync_timer is not None:
            self._sync_timer.cancel()
            self._sync_timer = None
        self._disk_stop.set()
        if self._disk is not None:  # the topic being written is finished; nothing else is begun
            self._disk.shutdown(wait=True, cancel_futures=True)
        if self._pid_writer is not None:
            self._pid_writer.shutdown(wait=True)
        if self._group_sync is not None:
            self._group_sync.close()
        try:
            self._close_detached_logs()
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

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._disk is None:
            self._disk = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="topic-disk")
        return self._disk

    def _write_topic_dir(self, info: TopicInfo, configs: Mapping[str, str]) -> Path:
        """Write ``info``'s directory under ``staging/`` (fsynced unless the policy is ``NEVER``) and rename it
        into ``topics/``: the topic's one atomic step. Returns its final path; on failure nothing is left (the
        staging directory is removed again, or on the next open). Touches no in-memory state: it runs on the
        event loop (:meth:`create_topic`) or on the worker thread (:meth:`create_reserved`)."""
        staging = self._dir / "staging" / info.topic_id.hex  # (a name + suffix could pass NAME_MAX)
        final = self._dir / "topics" / info.name
        meta = {"name": info.name, "topic_id": str(info.topic_id), "partitions": info.partitions}
        try:
            staging.mkdir()
            (staging / "topic.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")
            self.configs.write_new(staging, info.name, configs)
            if self._sync_enabled:
                _fsync_path(staging / "topic.json")
                fsync_dir(staging)
            os.rename(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return final

    def _write_reserved(self, topics: list[NewTopic]) -> list[_Written]:
        """The worker thread's part of :meth:`create_reserved`: each topic's directory, then one fsync of
        ``topics/``; if that fails, every topic written is taken back (renamed into ``trash/``)."""
        written: list[_Written] = []
        for topic in topics:
            if self._disk_stop.is_set():
                written.append(_Written(on_disk=False))
                continue
            try:
                self._write_topic_dir(topic.info, topic.configs)
            except OSError as exc:
                written.append(_Written(on_disk=False, error=exc))
            else:
                written.append(_Written(on_disk=True))
        if self._sync_enabled and any(w.on_disk for w in written):
            try:
                fsync_dir(self._dir / "topics")
            except OSError as exc:  # the names may not be durable: take them back, do not acknowledge them
                for i, topic in enumerate(topics):
                    if written[i].on_disk:
                        trash = self._dir / "trash" / topic.info.topic_id.hex
                        try:
                            os.rename(self._dir / "topics" / topic.info.name, trash)
                        except OSError:
                            written[i] = _Written(on_disk=True, error=exc)
                        else:
                            shutil.rmtree(trash, ignore_errors=True)
                            written[i] = _Written(on_disk=False, error=exc)
        return written

    async def _register_written(
        self, job: asyncio.Future[list[_Written]], topics: list[NewTopic]
    ) -> list[TopicInfo | OSError]:
        """The event loop's part of :meth:`create_reserved`: register what the worker put in ``topics/``."""
        try:
            written = await job
        except BaseException:
            for topic in topics:
                self.release(topic)
            raise
        outcomes: list[TopicInfo | OSError] = []
        with self.batched():
            for topic, done in zip(topics, written, strict=True):
                self.release(topic)
                if done.on_disk and not self._closed:
                    self.configs.adopt(topic.info.name, topic.configs)
                    self._register(topic.info)
                    self._changed()
                if done.error is not None:
                    outcomes.append(done.error)
                elif done.on_disk:
                    outcomes.append(topic.info)
                else:
                    outcomes.append(OSError("the topic store closed before the topic was created"))
        return outcomes

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
        interval = self._fsync is FsyncPolicy.INTERVAL
        plog.defer_interval_sync = interval
        plog.group_commit = self._group_sync is not None  # (its fsyncs run in rounds off the loop: see group_sync)
        plog.listener = _Waker(self, (name, p), plog if interval else None)
        return plog

    def _wake(self, key: tuple[str, int]) -> None:
        for future in self._waiters.pop(key, ()):
            if not future.done():
                future.set_result(None)


class AppendWaiter:
    """A long poll's registration for the next append to some partitions (``TopicStore.append_waiter``): woken
    once, by the first append to any of them after it was made; ``close`` it when done."""

    __slots__ = ("_keys", "_waiters", "future")

    def __init__(self, waiters: dict[tuple[str, int], set[asyncio.Future[None]]], keys: list[tuple[str, int]]) -> None:
        self._waiters = waiters
        self._keys = keys
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            waiters.setdefault(key, set()).add(self.future)

    async def wait(self, timeout_s: float) -> bool:
        """Until woken (``True``, at once if woken already) or ``timeout_s`` passed (``False``)."""
        try:
            await asyncio.wait_for(self.future, timeout_s)
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        for key in self._keys:
            waiting = self._waiters.get(key)
            if waiting is not None:
                waiting.discard(self.future)
                if not waiting:
                    del self._waiters[key]
        self._keys = []


class _Waker:
    """A partition log's listener: wakes the long polls waiting on that partition (and, under ``INTERVAL``,
    hands the log to the store's interval fsyncs, :meth:`TopicStore._sync_later`, or has it fsynced now if a
    roll waits for one: in the group commit's next round, even while one runs, since the segment that roll
    started cannot roll again until then)."""

    __slots__ = ("key", "plog", "store")

    def __init__(self, store: TopicStore, key: tuple[str, int], plog: PartitionLog | None) -> None:
        self.store = store
        self.key = key
        self.plog = plog

    def __call__(self) -> None:
        if self.plog is not None:
            if self.plog.roll_waits:
                self.store._unsynced.discard(self.plog)
                self.store._sync_partition(self.plog)
            else:
                self.store._sync_later(self.plog)
        if self.key in self.store._waiters:
            self.store._wake(self.key)


def _write_log_start_up(directory: Path, offset: int, sync: bool) -> None:
    write_log_start_up(directory, offset, sync=sync)


#: the worker's pause after removing each deleted topic's directory: removing one is Python work holding the
#: interpreter's lock between its system calls (a directory per partition, a few files each), and a thousand
#: removed back to back shared the lock with the event loop for as long (its turns stretched to 15-20 ms);
#: nobody waits for the removal
TRASH_PAUSE_S = 0.001


def _remove_trees(paths: list[Path], stop: threading.Event) -> None:
    """Remove deleted topics' directories from ``trash/`` (on the worker thread, ``TRASH_PAUSE_S`` between two;
    what is left when the store closes is removed on the next open)."""
    for path in paths:
        if stop.is_set():
            return
        shutil.rmtree(path, ignore_errors=True)
        if stop.wait(TRASH_PAUSE_S):
            return


class _GrowTopicFile:
    """A topic's ``topic.json`` replaced by one with ``count`` partitions (the rest kept), on any thread: staged
    under ``staging/`` as ``staged``, fsynced, renamed into the topic's directory, the directory fsynced (no
    fsyncs unless ``sync``); both directories held open as ``topic_fd`` and ``staging_fd``, closed by the call
    (or by ``close`` if it never runs). Raises what failed before the rename (nothing changed; the staged file
    removed); returns the final fsync's error, or None."""

    __slots__ = ("count", "staged", "staging_fd", "sync", "topic_fd")

    def __init__(self, topic_fd: int, staging_fd: int, staged: str, count: int, sync: bool) -> None:
        self.topic_fd, self.staging_fd, self.staged, self.count, self.sync = topic_fd, staging_fd, staged, count, sync

    def __call__(self) -> OSError | None:
        try:
            try:
                fd = os.open("topic.json", os.O_RDONLY | os.O_CLOEXEC, dir_fd=self.topic_fd)
                try:
                    meta = json.loads(os.read(fd, 1 << 20).decode("utf-8"))
                finally:
                    os.close(fd)
                meta["partitions"] = self.count
                write_file_in(self.staging_fd, self.staged, (json.dumps(meta) + "\n").encode("utf-8"), sync=self.sync)
                os.replace(self.staged, "topic.json", src_dir_fd=self.staging_fd, dst_dir_fd=self.topic_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(self.staged, dir_fd=self.staging_fd)
                raise
            if self.sync:
                try:
                    os.fsync(self.topic_fd)
                except OSError as exc:
                    return exc
            return None
        finally:
            self.close()

    def close(self) -> None:
        for fd in (self.topic_fd, self.staging_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _write_producer_ids(directory: Path, reserved: int, sync: bool) -> None:
    """``directory/producer-ids`` holds ``reserved`` (the first producer id not reserved), atomically, fsynced
    with its directory when ``sync``."""
    path = directory / "producer-ids"
    tmp = path.with_name("producer-ids.tmp")
    tmp.write_text(f"{reserved}\n", encoding="ascii")
    if sync:
        _fsync_path(tmp)
    os.replace(tmp, path)
    if sync:
        fsync_dir(directory)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _lock(directory: Path) -> int | None:
    return lock_directory(directory, "TopicStore")
