"""Parse and validate the JSON document ``regroup assign`` reads into a ``GroupSpec``.

Errors are ``InputError`` with a one-line message naming the field; the CLI prints it and exits 2.
Kafka's tolerant behaviour is kept where Kafka has one: owned partitions of unknown topics are dropped
and subscriptions to unknown topics are ignored (by the assignors themselves). An owned partition a known
topic does not have (partition 7 of a 3-partition topic) is an error.
"""

from __future__ import annotations

import json
from typing import Any

from regroup.assignors.spec import NO_GENERATION, GroupSpec, MemberSubscription


class InputError(ValueError):
    """The input document is malformed; the message names the offending field."""


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise InputError(message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_document(text: str) -> tuple[GroupSpec, dict[str, dict[str, list[int]]]]:
    """The spec, plus each member's previous assignment (``owned``) for the stickiness metrics."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
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
    members: dict[str, MemberSubscription] = {}
    previous: dict[str, dict[str, list[int]]] = {}
    for member_id, raw in members_raw.items():
        sub, owned = _parse_member(member_id, raw, topics)
        members[member_id] = sub
        previous[member_id] = owned
    racks = _parse_partition_racks(doc.get("partition_racks"))
    options = doc.get("options", {})
    _require(isinstance(options, dict), "'options' must be an object")
    spec = GroupSpec(topics=topics, members=members, partition_racks=racks, options=options)
    return spec, previous


def _parse_member(
    member_id: str, raw: Any, topics_known: dict[str, int]
) -> tuple[MemberSubscription, dict[str, list[int]]]:
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
    sub = MemberSubscription.of(topics, owned, generation=generation, rack=rack, instance_id=instance_id)
    return sub, {t: ps for t, ps in owned.items() if ps}


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
