"""A readable rendering of a run for people: the notable events (actions, group states, callbacks,
resets, timeouts, dropped messages, violations; the share group's states, members and released records) and
the summary. Heartbeats, record-by-record share rows and other routine traffic stay in the JSON event log."""

from __future__ import annotations

from collections.abc import Iterable

from regroup.sim.eventlog import Event
from regroup.sim.summary import Summary

NOTABLE = frozenset(
    {
        "action",
        "action_ignored",
        "group_state",
        "callback",
        "member_reset",
        "member_failed",
        "request_timeout",
        "message_dropped",
        "message_duplicated",
        "violation",
        "share_group_state",
        "share_member",
    }
)

#: how a share member's records went back, as the timeline says it
_RELEASES = {"close": "share session closed", "disconnect": "connection dropped"}


def _ownership_index(events: list[Event]) -> dict[tuple[str, str, int, int], list[str]]:
    """(kind, member, t, generation) -> partitions, for naming the partitions of each callback."""
    index: dict[tuple[str, str, int, int], list[str]] = {}
    for e in events:
        if e["type"] in ("assigned", "revoked", "lost"):
            key = (e["type"], e["member"], e["t"], e["generation"])
            index.setdefault(key, []).append(f"{e['topic']}-{e['partition']}")
    return index


def _line(index: dict[tuple[str, str, int, int], list[str]], e: Event) -> str | None:
    kind = e["type"]
    who = e["member"] or ""
    if kind == "action":
        return f"{who + ': ' if who else ''}{e['detail']}"
    if kind == "action_ignored":
        return f"{who}: ignored ({e['detail']})"
    if kind == "group_state":
        extra = f" ({e['detail']})" if e["detail"] else ""
        return f"group -> {e['state']}, generation {e['generation']}{extra}"
    if kind == "callback":
        if e["value"] == 0 and e["state"] != "revoked":
            return None
        names = ", ".join(sorted(set(index.get((e["state"], who, e["t"], e["generation"]), []))))
        return f"{who}: on_partitions_{e['state']}([{names}]) at generation {e['generation']}"
    if kind in ("member_reset", "member_failed", "request_timeout"):
        return f"{who}: {kind.replace('_', ' ')}: {e['detail']}"
    if kind == "message_dropped":
        return f"{who}: {e['api']} {e['state']} #{e['request_id']} dropped ({e['detail']})"
    if kind == "message_duplicated":
        return f"{who}: {e['api']} {e['state']} #{e['request_id']} duplicated"
    if kind == "violation":
        return f"VIOLATION: {e['detail']}"
    if kind == "share_group_state":
        return f"share group -> {e['state']}, epoch {e['generation']} ({e['detail']} members={e['value']})"
    if kind == "share_member":
        state = e["state"]
        if state == "joined":
            return f"{who}: joined the share group"
        if state == "left":
            return f"{who}: left the share group ({e['detail']})"
        return f"{who}: {_RELEASES.get(state, state)}, {e['value']} records released"
    return None


def render(events: list[Event], summary: Summary, scenario_name: str, seed: int, measure_from_ms: int = 0) -> str:
    """The timeline, then the summary; ``measure_from_ms``: the scenario's, said above the rebalance table."""
    out = [f"scenario {scenario_name}, seed {seed}", ""]
    index = _ownership_index(events)
    for e in events:
        if e["type"] in NOTABLE and (text := _line(index, e)) is not None:
            out.append(f"{e['t']:>9} ms  {text}")
    out.append("")
    out.extend(render_summary(summary, measure_from_ms))
    return "\n".join(out)


def render_summary(summary: Summary, measure_from_ms: int = 0) -> Iterable[str]:
    if measure_from_ms > 0:
        yield (
            f"rebalances: (from {measure_from_ms} ms, the scenario's measure_from_ms; those starting earlier, "
            "while the group formed, are left out)"
        )
    else:
        yield "rebalances:"
    if not summary.rebalances:
        yield "  (none)"
    header = ("generation", "start_ms", "end_ms", "rounds", "moved", "revoked", "unowned_partition_ms")
    if summary.rebalances:
        yield "  " + "  ".join(f"{h:>{len(h)}}" for h in header) + "  unowned partitions"
    for r in summary.rebalances:
        cells = (r.generation, r.start_ms, r.end_ms, r.rounds, r.moved, r.revoked, r.unowned_partition_ms)
        row = "  ".join(f"{c:>{len(h)}}" for c, h in zip(cells, header, strict=True))
        yield f"  {row}  {', '.join(r.unowned_partitions) or '-'}"
    yield "final assignment:"
    for member, per_topic in summary.final_assignment.items():
        parts = "; ".join(f"{t}: {ps}" for t, ps in per_topic.items()) or "(nothing)"
        yield f"  {member}: {parts}"
    if summary.share is not None:
        yield from render_share(summary)
    yield f"violations: {len(summary.violations)}"
    for v in summary.violations:
        yield f"  {v}"


def render_share(summary: Summary) -> Iterable[str]:
    share = summary.share
    if share is None:
        return
    yield "share group:"
    yield (
        f"  records {share.records}, delivered {share.delivered} ({share.deliveries} deliveries, "
        f"{share.redeliveries} redeliveries), accepted {share.accepted}, released {share.released}, "
        f"rejected {share.rejected}, archived {share.archived}, undone {share.undone}"
    )
    crash = share.delayed_by_crash
    if crash.records:
        yield (
            f"  delayed by a crash: {crash.records} records, {crash.min_delay_ms}-{crash.max_delay_ms} ms "
            f"(mean {crash.mean_delay_ms:g} ms)"
        )
    for member, stats in share.members.items():
        yield (
            f"  {member}: acquired {stats.acquired}, accepted {stats.accepted} in {stats.running_ms} ms "
            f"({stats.records_per_s:g} records/s)"
        )
