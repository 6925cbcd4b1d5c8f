"""Kafka's member order, which its range, round-robin and sticky assignors (and its coordinator) sort members
in: static members (with an instance id) by instance id first, then dynamic members by member id, strings
compared as Java's ``String.compareTo`` compares them (by UTF-16 code unit)."""

from __future__ import annotations

from collections.abc import Mapping

from regroup.assignors.spec import MemberSubscription


def java_string_key(value: str) -> bytes:
    """A sort key ordering strings as Java's ``String.compareTo`` does (by UTF-16 code unit).

    Python compares code points; the two orders differ only when characters outside the Basic
    Multilingual Plane meet characters in U+E000..U+FFFF.
    """
    return value.encode("utf-16-be", "surrogatepass")


def member_sort_key(member_id: str, instance_id: str | None) -> tuple[int, bytes, bytes]:
    """Kafka's member order: static members (with an instance id) by instance id, before dynamic members
    by member id. Two members claiming one instance id (which the coordinator does not allow) are put in
    member id order, where Kafka would keep whatever order it received them in."""
    if instance_id is not None:
        return (0, java_string_key(instance_id), java_string_key(member_id))
    return (1, java_string_key(member_id), b"")


#: the first UTF-16 surrogate code unit: strings of characters below it sort alike in Java and Python
_FIRST_SURROGATE = 0xD800


def kafka_member_order(members: Mapping[str, MemberSubscription]) -> list[str]:
    """Member ids sorted in Kafka's member order (see ``member_sort_key``)."""
    statics = [(sub.instance_id, m) for m, sub in members.items() if sub.instance_id is not None]
    names = "".join(members) + "".join(instance for instance, _ in statics)
    if not names or ord(max(names)) < _FIRST_SURROGATE:  # nothing Java orders differently: Python's order is Java's
        dynamic = sorted(m for m, sub in members.items() if sub.instance_id is None)
        return [m for _, m in sorted(statics)] + dynamic
    return sorted(members, key=lambda m: member_sort_key(m, members[m].instance_id))
