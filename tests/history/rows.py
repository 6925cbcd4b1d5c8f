"""Event-log rows as the server's ``GroupEvents`` writes them (``server/events.py``), built by hand for the
timeline's tests."""

from __future__ import annotations

from typing import Any

from regroup.model.eventlog import FIELDS

Row = dict[str, Any]


def row(t: int, type_: str, **values: Any) -> Row:
    out: Row = dict.fromkeys(FIELDS)
    out.update(values, t=t, type=type_)
    return out


def classic_state(
    t: int, group: str, state: str, generation: int, *, rebalance: str | None = None, cause: str | None = None
) -> Row:
    detail = f"group={group} type=classic protocol=range"
    if rebalance:
        detail += f" rebalance={rebalance}"
    detail += " leader=m-a"
    if cause:
        detail += f" cause={cause}"
    return row(t, "group_state", state=state, generation=generation, detail=detail)


def epoch_state(
    t: int,
    group: str,
    state: str,
    epoch: int,
    assignment_epoch: int,
    *,
    kind: str = "consumer",
    cause: str | None = None,
) -> Row:
    detail = f"group={group} type={kind} protocol=uniform assignment_epoch={assignment_epoch}"
    if cause:
        detail += f" cause={cause}"
    return row(t, "group_state", state=state, generation=epoch, detail=detail)


def joined(t: int, group: str, member_id: str, generation: int = 0) -> Row:
    return row(
        t,
        "member_state",
        member=member_id,
        member_id=member_id,
        generation=generation,
        state="Joined",
        detail=f"group={group}",
    )


def left(t: int, group: str, member_id: str, reason: str, generation: int = 0) -> Row:
    detail = f"group={group} reason={reason}"
    return row(
        t, "member_state", member=member_id, member_id=member_id, generation=generation, state="Left", detail=detail
    )


def assignment(t: int, group: str | None, generation: int, member_id: str, *partitions: tuple[str, int]) -> list[Row]:
    return [
        row(
            t,
            "group_assignment",
            member=member_id,
            member_id=member_id,
            generation=generation,
            topic=topic,
            partition=p,
            detail=f"group={group}" if group is not None else None,
        )
        for topic, p in partitions
    ]


def held(t: int, kind: str, group: str, member_id: str, epoch: int, *partitions: tuple[str, int]) -> list[Row]:
    """``assigned`` or ``revoked`` rows."""
    return [
        row(
            t,
            kind,
            member=member_id,
            member_id=member_id,
            generation=epoch,
            topic=topic,
            partition=p,
            detail=f"group={group}",
        )
        for topic, p in partitions
    ]


def interval(member_id: str, topic: str, partition: int, from_ms: int, to_ms: int | None) -> dict[str, Any]:
    return {"member_id": member_id, "topic": topic, "partition": partition, "from_ms": from_ms, "to_ms": to_ms}


def rebalance(
    start: int,
    end: int | None,
    number: int,
    reason: str,
    member: str | None,
    moved: int,
    unowned: int,
    key: str = "generation",
) -> dict[str, Any]:
    return {
        "start_ms": start,
        "end_ms": end,
        key: number,
        "reason": reason,
        "member": member,
        "moved": moved,
        "unowned_partition_ms": unowned,
    }
