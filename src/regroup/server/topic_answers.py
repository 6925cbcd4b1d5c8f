"""The encoded topic entries behind the answers that describe topics (Metadata, DescribeTopicPartitions), kept
current as the topics change, so that an answer costs what changed since the last one rather than what exists.

Per topic store (``answers_of``), ``TopicAnswers`` holds:

- the topics in name order and in Java's order (DescribeTopicPartitions'), each sorted again only when asked
  for after the store changed (``TopicStore.generation``);
- per entry format (``topic_entries.EntryFormat``: one per distinct encoding of the versions clients use),
  each topic's head and its whole entry but the tail, each remembered with the ``TopicInfo`` it was made from:
  a topic created, grown or deleted is a different ``TopicInfo``, so a stale entry is never served, and only
  the topics that changed are encoded again;
- ``remember`` / ``remembered``: whole arrays of entries (Metadata's all-topics answer, which the handler makes a
  slice of topics at a time) remembered under a key the handler chooses — the format and what the entries depend
  on, such as the principal and host of an ACL-filtered answer — until the topics change or the handler's
  ``stamp`` does (the ACLs' generation). At most ``JOINED_MAX_BYTES`` of them are kept, the oldest dropped first.

Every structure is touched only on the event loop thread, as the store is.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from typing import Any

from regroup.server.api import TopicInfo
from regroup.server.topic_entries import EntryFormat
from regroup.server.topics import TopicStore

__all__ = ["JOINED_MAX_BYTES", "TopicAnswers", "answers_of", "java_order"]

#: the most bytes of joined arrays remembered at once (an all-topics answer at 100,000 partitions is ~3 MB)
JOINED_MAX_BYTES = 64 * 1024 * 1024
_Cached = dict[str, tuple[TopicInfo, bytes]]


def java_order(name: str) -> bytes:
    """A sort key ordering names as Java's ``String.compareTo`` does (by UTF-16 code unit)."""
    return name.encode("utf-16-be", errors="surrogatepass")


class TopicAnswers:
    """The cached entries of one topic store (see the module doc)."""

    def __init__(self, store: TopicStore) -> None:
        self._store = weakref.proxy(store)  # (the answers live as long as the store, never keep it alive)
        self._generation = self._java_generation = -1
        self._by_name: list[TopicInfo] = []
        self._java_keys: list[bytes] = []
        self._by_java: list[TopicInfo] = []
        self._bodies: dict[EntryFormat, _Cached] = {}
        self._heads: dict[EntryFormat, _Cached] = {}
        self._joined: dict[Hashable, tuple[int, object, int, bytes]] = {}
        self._joined_bytes = 0

    # ------------------------------------------------------------------ the topics, sorted

    def by_name(self) -> list[TopicInfo]:
        """Every topic, by name (do not change the list)."""
        generation = self._store.generation
        if self._generation != generation:
            topics = self._store.topics()
            self._by_name = [topics[name] for name in sorted(topics)]
            self._generation = generation
            self._prune(topics)
        return self._by_name

    def by_java_order(self) -> tuple[list[bytes], list[TopicInfo]]:
        """(each topic's ``java_order`` key, the topics) in Java's order of names (do not change the lists)."""
        generation = self._store.generation
        if self._java_generation != generation:
            keyed = sorted(((java_order(info.name), info) for info in self.by_name()), key=lambda pair: pair[0])
            self._java_keys = [key for key, _ in keyed]
            self._by_java = [info for _, info in keyed]
            self._java_generation = generation
        return self._java_keys, self._by_java

    # ------------------------------------------------------------------ entries

    def body(self, fmt: EntryFormat, info: TopicInfo) -> bytes:
        """``info``'s entry in ``fmt`` without its tail: head and every partition."""
        cached = self._bodies.get(fmt)
        if cached is None:
            cached = self._bodies[fmt] = {}
        found = cached.get(info.name)
        if found is not None and found[0] is info:
            return found[1]
        body = fmt.head(info) + fmt.partitions(0, info.partitions)
        cached[info.name] = (info, body)
        return body

    def head(self, fmt: EntryFormat, info: TopicInfo) -> bytes:
        """``info``'s head in ``fmt`` (for entries holding some of its partitions)."""
        cached = self._heads.get(fmt)
        if cached is None:
            cached = self._heads[fmt] = {}
        found = cached.get(info.name)
        if found is not None and found[0] is info:
            return found[1]
        head = fmt.head(info)
        cached[info.name] = (info, head)
        return head

    def remembered(self, key: Hashable, stamp: object) -> tuple[int, bytes] | None:
        """The (count, entries) remembered under ``key`` (``remember``), if made for the topics as they are and
        with ``stamp``; None otherwise (and what was remembered under ``key`` is forgotten)."""
        found = self._joined.get(key)
        if found is None:
            return None
        if found[0] == self._store.generation and found[1] == stamp:
            return found[2], found[3]
        del self._joined[key]
        self._joined_bytes -= len(found[3])
        return None

    def remember(self, key: Hashable, generation: int, stamp: object, count: int, data: bytes) -> None:
        """Remember (count, entries) under ``key``, as made from the topics of ``generation`` (the store's, read
        before the making began: entries made while the topics changed are never found) with ``stamp``."""
        old = self._joined.pop(key, None)
        if old is not None:
            self._joined_bytes -= len(old[3])
        while self._joined and self._joined_bytes + len(data) > JOINED_MAX_BYTES:
            oldest = next(iter(self._joined))
            self._joined_bytes -= len(self._joined.pop(oldest)[3])
        if len(data) <= JOINED_MAX_BYTES:
            self._joined[key] = (generation, stamp, count, data)
            self._joined_bytes += len(data)

    @property
    def generation(self) -> int:
        """The topic store's generation (what ``remember`` is told)."""
        generation: int = self._store.generation
        return generation

    # ------------------------------------------------------------------ internals

    def _prune(self, topics: dict[str, TopicInfo]) -> None:
        """Forget the entries of deleted topics once they are many."""
        for cache in (*self._bodies.values(), *self._heads.values()):
            if len(cache) > 2 * len(topics) + 1024:
                for name in [name for name in cache if name not in topics]:
                    del cache[name]


_ANSWERS: weakref.WeakKeyDictionary[Any, TopicAnswers] = weakref.WeakKeyDictionary()


def answers_of(store: TopicStore) -> TopicAnswers:
    """The ``TopicAnswers`` of ``store`` (made on first use, gone with the store)."""
    answers = _ANSWERS.get(store)
    if answers is None:
        answers = _ANSWERS[store] = TopicAnswers(store)
    return answers
