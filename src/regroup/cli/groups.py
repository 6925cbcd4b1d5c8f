"""``regroup groups``: the consumer groups of any Kafka-compatible broker (a Kafka cluster or ``regroup serve``),
read over Kafka's own APIs:

    regroup groups list [--bootstrap-server HOST:PORT] [--json]
    regroup groups describe GROUP [--bootstrap-server HOST:PORT] [--json]
    regroup groups lag GROUP [--bootstrap-server HOST:PORT] [--json]
    regroup groups timeline GROUP [--http URL] [--since-ms N] [--until-ms N] [--json]

``timeline`` reads ``regroup serve``'s rebalance history from its HTTP console (``--http-port``): one row per
rebalance for people, the server's document for scripts.

This module owns the arguments and the output: aligned tables for people, or with ``--json`` one JSON
document for scripts (docs/operations.md, "Inspecting groups: regroup groups"). What is read, and how, is
``groups_view``; the sockets are ``groups_wire``. A broker that cannot be reached, an unknown group or an
error answer prints one line on stderr and exits with code 1; bad arguments exit with code 2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Sequence
from typing import Any, Final

from regroup.cli.groups_view import (
    CLASSIC,
    Group,
    PartitionLag,
    describe_group,
    group_lag,
    group_timeline,
    list_groups,
)
from regroup.cli.groups_wire import Cluster, WireError, parse_base_url, parse_bootstrap

__all__ = ["GroupsUsageError", "add_parser", "run"]

DEFAULT_BOOTSTRAP: Final = "127.0.0.1:9092"
DEFAULT_HTTP: Final = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT_S: Final = 10.0
EXIT_FAILED: Final = 1


class GroupsUsageError(Exception):
    """A bad argument: reported by the ``regroup`` command as one line, exit 2."""


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "groups",
        help="list, describe and measure the lag of a Kafka cluster's consumer groups",
        description="Consumer groups over Kafka's own APIs, against any Kafka-compatible broker.",
    )
    # (a missing command is reported with the usage: `cli.main.missing_command`)
    actions = parser.add_subparsers(dest="groups_command", required=False, metavar="{list,describe,lag,timeline}")
    listing = actions.add_parser("list", help="every group: type, state, assignor, members, total lag")
    describe = actions.add_parser("describe", help="one group: state, generation or epoch, members, assignments")
    describe.add_argument("group", help="the group id")
    lag = actions.add_parser("lag", help="one group's committed offset, log end offset and lag per partition")
    lag.add_argument("group", help="the group id")
    for action in (listing, describe, lag):
        action.add_argument(
            "--bootstrap-server",
            default=DEFAULT_BOOTSTRAP,
            help=f"host:port[,host:port...] of a broker (default {DEFAULT_BOOTSTRAP})",
        )
        action.add_argument("--json", action="store_true", help="one JSON document instead of a table")
        action.add_argument(
            "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds to wait for a broker (default 10)"
        )
    timeline = actions.add_parser(
        "timeline", help="one group's rebalances and partition ownership, from regroup serve's HTTP console"
    )
    timeline.add_argument("group", help="the group id")
    timeline.add_argument(
        "--http",
        default=DEFAULT_HTTP,
        metavar="URL",
        help=f"regroup serve's HTTP console, http://[user:password@]host:port (default {DEFAULT_HTTP})",
    )
    timeline.add_argument("--since-ms", type=int, metavar="N", help="only what overlaps from N (epoch milliseconds)")
    timeline.add_argument("--until-ms", type=int, metavar="N", help="only what overlaps until N (epoch milliseconds)")
    timeline.add_argument("--json", action="store_true", help="the server's JSON document instead of a table")
    timeline.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds to wait for the server (default 10)"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``regroup groups ...``; broker-side failures are reported here (one line on stderr), exit 1."""
    if args.groups_command == "timeline":
        return _run_timeline(args)
    try:
        bootstrap = parse_bootstrap(args.bootstrap_server)
    except ValueError as exc:
        raise GroupsUsageError(str(exc)) from None
    if not args.timeout > 0:
        raise GroupsUsageError("--timeout: must be a positive number of seconds")
    try:
        with Cluster(bootstrap, args.timeout) as cluster:
            if args.groups_command == "list":
                out = _list(list_groups(cluster), args.json)
            elif args.groups_command == "describe":
                out = _describe(describe_group(cluster, args.group), args.json)
            else:
                group, rows = group_lag(cluster, args.group)
                out = _lag(group, rows, args.json)
    except WireError as exc:
        print(f"regroup: {exc}", file=sys.stderr)
        return EXIT_FAILED
    sys.stdout.write(out)
    return 0


def _run_timeline(args: argparse.Namespace) -> int:
    try:
        base = parse_base_url(args.http)
    except ValueError as exc:
        raise GroupsUsageError(f"--http: {exc}") from None
    if not args.timeout > 0:
        raise GroupsUsageError("--timeout: must be a positive number of seconds")
    try:
        doc = group_timeline(base, args.group, args.since_ms, args.until_ms, args.timeout)
    except WireError as exc:
        print(f"regroup: {exc}", file=sys.stderr)
        return EXIT_FAILED
    sys.stdout.write(_json(doc) if args.json else _timeline(args.group, doc))
    return 0


def _timeline(group_id: str, doc: dict[str, Any]) -> str:
    """One row per rebalance: when it started, how long it took, the generation or epoch it reached, why, the
    member that caused it, the partitions that moved and the partition-milliseconds without an owner."""
    rebalances: list[dict[str, Any]] = [r for r in doc.get("rebalances", []) if isinstance(r, dict)]
    number = "epoch" if any("epoch" in r for r in rebalances) else "generation"
    rows = []
    for r in rebalances:
        start, end = r.get("start_ms"), r.get("end_ms")
        took = f"{end - start}ms" if isinstance(start, int) and isinstance(end, int) else "ongoing"
        rows.append(
            [
                _when(start),
                took,
                _text(r.get(number)),
                str(r.get("reason") or "-"),
                str(r.get("member") or "-"),
                _text(r.get("moved")),
                _text(r.get("unowned_partition_ms")),
            ]
        )
    intervals = len(doc.get("ownership", []))
    head = f"group {group_id}: {len(rows)} rebalances, {intervals} ownership intervals"
    headers = ["START", "TOOK", number.upper(), "REASON", "MEMBER", "MOVED", "UNOWNED_MS"]
    return head + "\n" + table(headers, rows)


def _when(ms: object) -> str:
    if not isinstance(ms, int):
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _list(groups: list[Group], as_json: bool) -> str:
    if as_json:
        docs = [
            {
                "group_id": g.group_id,
                "type": g.type,
                "state": g.state,
                _protocol_key(g): g.protocol,
                "members": len(g.members),
                "lag": g.lag,
            }
            for g in groups
        ]
        return _json({"groups": docs})
    rows = [[g.group_id, g.type, g.state, g.protocol or "-", str(len(g.members)), _text(g.lag)] for g in groups]
    return table(["GROUP", "TYPE", "STATE", "ASSIGNOR", "MEMBERS", "LAG"], rows)


def _describe(group: Group, as_json: bool) -> str:
    if as_json:
        doc: dict[str, Any] = {"group_id": group.group_id, "type": group.type, "state": group.state}
        if group.type == CLASSIC:
            doc["generation"] = None
        else:
            doc["epoch"] = group.epoch
        doc[_protocol_key(group)] = group.protocol
        doc["members"] = [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "instance_id": m.instance_id,
                "assignment": m.assignment,
            }
            for m in group.members
        ]
        return _json(doc)
    epoch = "" if group.type == CLASSIC else f", epoch {group.epoch}"
    head = f"group {group.group_id}: {group.type}, {group.state}{epoch}, {_protocol_key(group)} {group.protocol or '-'}"
    rows = [
        [m.member_id, m.client_id, m.host, m.instance_id or "-", _assignment_text(m.assignment)] for m in group.members
    ]
    return head + "\n" + table(["MEMBER", "CLIENT", "HOST", "INSTANCE", "ASSIGNMENT"], rows)


def _lag(group: Group, rows: list[PartitionLag], as_json: bool) -> str:
    if as_json:
        by_topic: dict[str, dict[str, int | None]] = {}
        for r in rows:
            by_topic.setdefault(r.topic, {})[str(r.partition)] = r.lag
        partitions = [
            {
                "topic": r.topic,
                "partition": r.partition,
                "committed": r.committed,
                "end": r.end,
                "lag": r.lag,
                "owner": r.owner,
            }
            for r in rows
        ]
        return _json({"group_id": group.group_id, "lag": by_topic, "partitions": partitions})
    lines = [[r.topic, str(r.partition), _text(r.committed), _text(r.end), _text(r.lag), r.owner or "-"] for r in rows]
    total = sum(lag for r in rows if (lag := r.lag) is not None)
    head = f"group {group.group_id}: {group.type}, {group.state}, total lag {total}"
    return head + "\n" + table(["TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "OWNER"], lines)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart, one line per row, the header first."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in [headers, *rows]]
    return "\n".join(lines) + "\n"


def _protocol_key(group: Group) -> str:
    return "protocol" if group.type == CLASSIC else "assignor"


def _assignment_text(assignment: dict[str, list[int]]) -> str:
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in assignment.items()) or "-"


def _text(value: object) -> str:
    return "-" if value is None else str(value)


def _json(doc: object) -> str:
    return json.dumps(doc, indent=2) + "\n"
