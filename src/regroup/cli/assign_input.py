"""Parse and validate the JSON document ``regroup assign`` reads into a ``GroupSpec``.

Errors are ``InputError`` with a one-line message naming the field; the CLI prints it and exits 2.
Kafka's tolerant behaviour is kept where Kafka has one: owned partitions of unknown topics are dropped
and subscriptions to unknown topics are ignored (by the assignors themselves). An owned partition a known
topic does not have (partition 7 of a 3-partition topic) is an error.

A group of a million owned partitions is read in one pass over arrays (``_fast_members``) when every field
is as expected; anything else (an error to report, unsorted or repeated partitions, an empty list) goes
through the field-by-field reading, which gives the same spec and names the field at fault.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from regroup.assignors.spec import NO_GENERATION, GroupSpec, MemberSubscription


class InputError(ValueError):
    """The input document is malformed; the message names the offending field."""


class NotUtf8Error(InputError):
    """The input is not UTF-8 text."""

    def __init__(self) -> None:
        super().__init__("input is not UTF-8 text")


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise InputError(message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


Previous = Mapping[str, Mapping[str, tuple[int, ...]]]


def load_json(data: bytes) -> Any:
    """The JSON value of ``data`` (UTF-8). orjson reads it; what orjson refuses (and Python's reader may
    accept: NaN, integers beyond 64 bits, lone surrogates) or malformed input gets Python's reader and its
    error message."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotUtf8Error() from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def parse_document(data: bytes | str) -> tuple[GroupSpec, Previous]:
    """The spec, plus each member's previous assignment (``owned``, without empty lists) for the
    stickiness metrics."""
    doc = load_json(data.encode("utf-8") if isinstance(data, str) else data)
    _require(isinstance(doc, dict), "input must be a JSON object with 'topics' and 'members'")
    topics_raw = doc.get("topics", {})
    _require(isinstance(topics_raw, dict), "'topics' must be an object of topic name -> partition count")
    topics: dict[str, int] = {}
    for name, count in topics_raw.items():
        _require(_is_int(count), f"topics.{name}: partition count must be an integer, got {count!r}")
        _require(count >= 0, f"topics.{name}: partition count must not be negative, got {count}")
        topics[name] = count
    members_raw = doc.get("members", {})
    _require(isinstance(members_raw, dict), "'members' must be an object of member id -> subscription")
    members = _fast_members(members_raw, topics)
    if members is None:
        members = {}
        for member_id, raw in members_raw.items():
            members[member_id] = _parse_member(member_id, raw, topics)
    racks = _parse_partition_racks(doc.get("partition_racks"))
    options = doc.get("options", {})
    _require(isinstance(options, dict), "'options' must be an object")
    spec = GroupSpec(topics=topics, members=members, partition_racks=racks, options=options)
    return spec, {m: sub.owned for m, sub in members.items()}


def _fast_members(members_raw: dict[str, Any], topics_known: dict[str, int]) -> dict[str, MemberSubscription] | None:
    """``_parse_member`` of every member at once, or None unless every member is an object with a list of
    topic names, an object of owned partitions whose every list is non-empty, ascending without repeats and
    within its topic, a generation, rack and instance id of the right types: the common case, checked on
    arrays rather than number by number."""
    rows: list[tuple[str, tuple[str, ...], list[str], list[Any], int, Any, Any]] = []
    subscriptions: dict[tuple[str, ...], tuple[str, ...]] = {}
    for member_id, raw in members_raw.items():
        if type(raw) is not dict:
            return None
        topics = raw.get("topics", [])
        if type(topics) is not list:
            return None
        owned_raw = raw.get("owned") or {}
        generation = raw.get("generation", NO_GENERATION)
        if generation is None:
            generation = NO_GENERATION
        rack = raw.get("rack")
        instance_id = raw.get("instance_id")
        if (
            type(owned_raw) is not dict
            or type(generation) is not int
            or not (rack is None or type(rack) is str)
            or not (instance_id is None or type(instance_id) is str)
        ):
            return None
        key = tuple(topics)
        try:
            subscribed = subscriptions.get(key)
        except TypeError:  # an unhashable entry: not a topic name
            return None
        if subscribed is None:
            if not set(map(type, topics)) <= {str}:
                return None
            subscribed = subscriptions[key] = tuple(sorted(set(topics)))
        rows.append((member_id, subscribed, list(owned_raw), list(owned_raw.values()), generation, rack, instance_id))
    names = list(itertools.chain.from_iterable(row[2] for row in rows))
    lists = list(itertools.chain.from_iterable(row[3] for row in rows))
    if not set(map(type, lists)) <= {list}:
        return None
    flat = list(itertools.chain.from_iterable(lists))
    if not set(map(type, flat)) <= {int}:
        return None
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    try:
        partitions = np.fromiter(flat, dtype=np.int64, count=len(flat))
    except OverflowError:
        return None
    if len(lists) and int(lengths.min()) == 0:
        return None
    if len(flat):
        limits = np.fromiter(map(topics_known.get, names, itertools.repeat(-1)), dtype=np.int64, count=len(names))
        limits = np.repeat(limits, lengths)  # -1: a topic not in 'topics' (its partitions are not checked)
        if int(partitions.min()) < 0 or bool(((limits >= 0) & (partitions >= limits)).any()):
            return None
        rising = np.diff(partitions) > 0
        starts = np.cumsum(lengths)[:-1]
        rising[starts[starts < len(flat)] - 1] = True  # where one list ends and the next starts
        if not bool(rising.all()):
            return None
    owned_lists = iter(list(map(tuple, lists)))
    members: dict[str, MemberSubscription] = {}
    for member_id, subscribed, topic_names, _, generation, rack, instance_id in rows:
        owned = dict(zip(topic_names, itertools.islice(owned_lists, len(topic_names)), strict=True))
        members[member_id] = MemberSubscription(
            topics=subscribed,
            owned=owned if topic_names == sorted(topic_names) else dict(sorted(owned.items())),
            generation=generation,
            rack=rack,
            instance_id=instance_id,
        )
    return members


def _parse_member(member_id: str, raw: Any, topics_known: dict[str, int]) -> MemberSubscription:
    where = f"members.{member_id}"
    _require(isinstance(raw, dict), f"{where}: must be an object")
    topics = raw.get("topics", [])
    _require(
        isinstance(topics, list) and all(isinstance(t, str) for t in topics),
        f"{where}.topics: must be a list of topic names",
    )
    owned_raw = raw.get("owned") or {}
    _require(isinstance(owned_raw, dict), f"{where}.owned: must be an object of topic -> partitions")
    owned: dict[str, list[int]] = {}
    for topic, partitions in owned_raw.items():
        _require(
            isinstance(partitions, list) and all(_is_int(p) for p in partitions),
            f"{where}.owned.{topic}: must be a list of partition numbers",
        )
        _require(all(p >= 0 for p in partitions), f"{where}.owned.{topic}: partition numbers must not be negative")
        count = topics_known.get(topic)
        beyond = [p for p in partitions if count is not None and p >= count]
        _require(
            not beyond,
            f"{where}.owned.{topic}: partition {min(beyond, default=0)} does not exist "
            f"(topic {topic} has {count} partition{'' if count == 1 else 's'})",
        )
        owned[topic] = sorted(set(partitions))
    generation = raw.get("generation", NO_GENERATION)
    if generation is None:
        generation = NO_GENERATION
    _require(_is_int(generation), f"{where}.generation: must be an integer or null")
    rack = raw.get("rack")
    _require(rack is None or isinstance(rack, str), f"{where}.rack: must be a string or null")
    instance_id = raw.get("instance_id")
    _require(instance_id is None or isinstance(instance_id, str), f"{where}.instance_id: must be a string or null")
    return MemberSubscription.of(topics, owned, generation=generation, rack=rack, instance_id=instance_id)


def _parse_partition_racks(raw: Any) -> dict[str, tuple[frozenset[str], ...]] | None:
    if raw is None:
        return None
    _require(isinstance(raw, dict), "'partition_racks' must be an object of topic -> list of rack lists")
    out: dict[str, tuple[frozenset[str], ...]] = {}
    for topic, per_partition in raw.items():
        _require(isinstance(per_partition, list), f"partition_racks.{topic}: must be a list (one entry per partition)")
        racks: list[frozenset[str]] = []
        for i, entry in enumerate(per_partition):
            _require(
                isinstance(entry, list) and all(isinstance(r, str) for r in entry),
                f"partition_racks.{topic}[{i}]: must be a list of rack ids",
            )
            racks.append(frozenset(entry))
        out[topic] = tuple(racks)
    return out
