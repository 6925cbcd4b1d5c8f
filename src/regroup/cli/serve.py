"""``regroup serve``: run the Kafka-wire server (group coordinator + embedded partition log) until SIGTERM or
SIGINT. Problems with the arguments or the environment (port in use, unusable data directory, unwritable
events file) print one line on stderr and exit with 2; a clean shutdown exits 0, a failed log write 1."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from regroup.server.limits import CLIENT_ID, DEFAULT_LIMITS, INSTANCE_ID, MEMBER_ID, MEMBER_ID_SUFFIX_BYTES

if TYPE_CHECKING:
    from regroup.coordinator.config import CoordinatorConfig

LOG_LEVELS = ("debug", "info", "warning", "error")
#: the identifier limits' kinds (``regroup.server.limits``) and their flags' names
_ID_LIMIT_FLAGS = {
    "group id": "group-id",
    "member id": "member-id",
    "group instance id": "instance-id",
    "client id": "client-id",
    "topic name": "topic-name",
    "transactional id": "transactional-id",
}
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class ServeError(Exception):
    """A problem with what the user gave (arguments, port, data directory); one line, exit 2."""


def _int_at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            upper = "" if maximum is None else f"..{maximum}"
            raise argparse.ArgumentTypeError(f"{value} outside {minimum}{upper or '..'}")
        return value

    return parse


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "serve",
        help="run the Kafka-wire group coordinator server",
        description="Serve the Kafka protocol (group coordination, offsets, embedded topics) on one node.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=_int_at_least(0, 65535), default=9092, help="port to listen on (default 9092; 0 = any free)"
    )
    parser.add_argument("--advertised-host", help="host name FindCoordinator/Metadata tell clients (default: --host)")
    parser.add_argument(
        "--advertised-port",
        type=_int_at_least(1, 65535),
        help="port FindCoordinator/Metadata tell clients, e.g. a proxy's (default: the port listened on)",
    )
    parser.add_argument("--data-dir", default="./regroup-data", help="where the logs live (default ./regroup-data)")
    parser.add_argument(
        "--fsync",
        choices=("always", "interval", "never"),
        default="always",
        help="when appended records reach stable storage (default always: before any response)",
    )
    parser.add_argument("--events", metavar="FILE", help="append group state changes as JSON lines to FILE")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="logging level (default info)")
    parser.add_argument(
        "--initial-rebalance-delay-ms",
        type=_int_at_least(0),
        default=3000,
        help="group.initial.rebalance.delay.ms: wait for more members before a new group's first rebalance",
    )
    parser.add_argument(
        "--max-frame-bytes",
        type=_int_at_least(1),
        default=100 * 1024 * 1024,
        help="largest request accepted (socket.request.max.bytes); bigger closes the connection",
    )
    parser.add_argument(
        "--connections-max-idle-ms",
        type=_int_at_least(1),
        default=600_000,
        metavar="MS",
        help="close connections idle longer than this (connections.max.idle.ms; default 600000)",
    )
    parser.add_argument(
        "--max-connections",
        type=_int_at_least(1),
        default=10_000,
        metavar="N",
        help="max.connections: most client connections open at once; more are closed when accepted "
        "(default 10000, capped by the open-file limit)",
    )
    parser.add_argument(
        "--max-connections-per-ip",
        type=_int_at_least(1),
        default=5_000,
        metavar="N",
        help="max.connections.per.ip: most client connections open from one address (default 5000)",
    )
    parser.add_argument(
        "--connection-max-in-flight",
        type=_int_at_least(1),
        default=64,
        metavar="N",
        help="requests of one connection waiting for a parked or earlier request; at the limit the server "
        "stops reading that connection (default 64)",
    )
    parser.add_argument(
        "--connection-max-queued-bytes",
        type=_int_at_least(1),
        default=1024 * 1024,
        metavar="BYTES",
        help="response bytes of one connection not yet taken by its socket; past it the server stops reading "
        "that connection until its client reads (default 1048576)",
    )
    limits = parser.add_argument_group(
        "identifier limits", "longer identifiers in a request are answered with INVALID_REQUEST (docs/operations.md)"
    )
    for kind, flag in _ID_LIMIT_FLAGS.items():
        limits.add_argument(
            f"--max-{flag}-bytes",
            type=_int_at_least(1, 32767),
            default=DEFAULT_LIMITS[kind],
            metavar="N",
            help=f"longest {kind} accepted, in UTF-8 bytes (default {DEFAULT_LIMITS[kind]})",
        )
    consumer = parser.add_argument_group("KIP-848 consumer groups")
    consumer.add_argument(
        "--consumer-heartbeat-interval-ms",
        type=_int_at_least(1),
        default=5_000,
        metavar="MS",
        help="group.consumer.heartbeat.interval.ms: how often members heartbeat (default 5000)",
    )
    consumer.add_argument(
        "--consumer-session-timeout-ms",
        type=_int_at_least(1),
        default=45_000,
        metavar="MS",
        help="group.consumer.session.timeout.ms: a silent member is fenced after this (default 45000)",
    )
    consumer.add_argument(
        "--consumer-max-size",
        type=_int_at_least(1),
        default=None,
        metavar="N",
        help="group.consumer.max.size: most members in one consumer group (default unlimited)",
    )
    consumer.add_argument(
        "--consumer-assignors",
        default="uniform,server-range",
        metavar="NAMES",
        help="group.consumer.assignors: server-side assignors clients may name, the first is the default "
        "(default uniform,server-range; Kafka's name range is accepted for server-range)",
    )
    consumer.add_argument(
        "--migration-policy",
        choices=("disabled", "upgrade", "downgrade", "bidirectional"),
        default="bidirectional",
        help="group.consumer.migration.policy: online conversion between classic and consumer groups "
        "(default bidirectional)",
    )
    topics = parser.add_argument_group("embedded topics")
    topics.add_argument(
        "--max-partitions-per-topic",
        type=_int_at_least(1),
        default=10_000,
        metavar="N",
        help="most partitions one topic may have; CreateTopics over it gets INVALID_PARTITIONS (default 10000)",
    )
    topics.add_argument(
        "--max-partitions",
        type=_int_at_least(1),
        default=100_000,
        metavar="N",
        help="most partitions of all topics together; a creation over it gets POLICY_VIOLATION (default 100000)",
    )
    topics.add_argument(
        "--num-partitions",
        type=_int_at_least(1),
        default=1,
        metavar="N",
        help="num.partitions: partitions of a topic created automatically or without a count (default 1)",
    )
    topics.add_argument(
        "--auto-create-topics",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="auto.create.topics.enable: Metadata creates a missing topic a client asks for (default: on)",
    )
    topics.add_argument(
        "--message-max-bytes",
        type=_int_at_least(0),
        default=1024 * 1024 + 12,
        metavar="BYTES",
        help="message.max.bytes: largest record batch a topic without max.message.bytes accepts "
        "(default 1048588; at most --max-frame-bytes)",
    )
    topics.add_argument(
        "--log-retention-check-interval-ms",
        type=_int_at_least(1),
        default=300_000,
        metavar="MS",
        help="log.retention.check.interval.ms: how often retention, segment.ms and compaction run (default 300000)",
    )
    topics.add_argument(
        "--max-open-segment-files",
        type=_int_at_least(1),
        default=256,
        metavar="N",
        help="segment files held open at once, least recently used closed first (default 256; never more than a "
        "quarter of the open-file limit)",
    )
    txns = parser.add_argument_group("transactions")
    txns.add_argument(
        "--transaction-max-timeout-ms",
        type=_int_at_least(1),
        default=900_000,
        metavar="MS",
        help="transaction.max.timeout.ms: the longest transaction timeout a producer may ask for; longer is "
        "INVALID_TRANSACTION_TIMEOUT (default 900000)",
    )
    txns.add_argument(
        "--transactional-id-expiration-ms",
        type=_int_at_least(1),
        default=604_800_000,
        metavar="MS",
        help="transactional.id.expiration.ms: a transactional id with no transaction open is forgotten after "
        "this long without use (default 604800000, 7 days)",
    )
    parser.add_argument(
        "--metrics-port",
        type=_int_at_least(0, 65535),
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (default: off; 0 = any free port)",
    )
    parser.add_argument(
        "--metrics-host", metavar="HOST", help="address of the metrics endpoint (default: the --host address)"
    )
    parser.add_argument(
        "--stats-interval",
        type=_int_at_least(1),
        default=60,
        metavar="SECONDS",
        help="log request counts and rates per API every SECONDS (default 60)",
    )


def _coordinator_config(args: argparse.Namespace) -> CoordinatorConfig:
    """The coordinator's settings from the flags; inconsistent ones are a ``ServeError``."""
    from regroup.assignors import registry
    from regroup.coordinator.config import CoordinatorConfig
    from regroup.coordinator.consumer.target import SERVER_ASSIGNORS

    heartbeat_ms, session_ms = args.consumer_heartbeat_interval_ms, args.consumer_session_timeout_ms
    if heartbeat_ms >= session_ms:
        raise ServeError(
            f"--consumer-heartbeat-interval-ms ({heartbeat_ms}) must be less than "
            f"--consumer-session-timeout-ms ({session_ms})"
        )
    named = [name.strip() for name in args.consumer_assignors.split(",") if name.strip()]
    ours = [registry.server_side_name(name) for name in named]
    assignors = tuple(registry.wire_name(name) for name in ours if name is not None)  # the names clients send
    known = set(assignors) <= SERVER_ASSIGNORS.keys()
    if not named or None in ours or len(set(assignors)) != len(assignors) or not known:
        raise ServeError(
            f"--consumer-assignors {args.consumer_assignors!r}: name each of {', '.join(registry.SERVER_SIDE)} "
            "at most once, at least one (range = server-range)"
        )
    extra = {} if args.consumer_max_size is None else {"consumer_group_max_size": args.consumer_max_size}
    return CoordinatorConfig(
        group_initial_rebalance_delay_ms=args.initial_rebalance_delay_ms,
        consumer_group_heartbeat_interval_ms=heartbeat_ms,
        consumer_group_session_timeout_ms=session_ms,
        consumer_group_assignors=assignors,
        consumer_group_migration_policy=args.migration_policy,
        **extra,
    )


def _id_limits(args: argparse.Namespace) -> dict[str, int]:
    """The identifier limits from the flags; a member id limit too small for generated member ids is a
    ``ServeError``."""
    limits = {kind: getattr(args, f"max_{flag.replace('-', '_')}_bytes") for kind, flag in _ID_LIMIT_FLAGS.items()}
    needed = max(limits[CLIENT_ID], limits[INSTANCE_ID]) + MEMBER_ID_SUFFIX_BYTES
    if limits[MEMBER_ID] < needed:
        raise ServeError(
            f"--max-member-id-bytes ({limits[MEMBER_ID]}) must be at least {needed}: a generated member id is the "
            f"client or instance id followed by {MEMBER_ID_SUFFIX_BYTES} bytes"
        )
    return limits


def run(args: argparse.Namespace) -> int:
    from regroup.server.app import ServerConfig, StartupError
    from regroup.server.app import run as run_server
    from regroup.storage.record_log import FsyncPolicy
    from regroup.transactions.results import TxnConfig

    logging.basicConfig(level=args.log_level.upper(), format=LOG_FORMAT, stream=sys.stderr)
    config = ServerConfig(
        host=args.host,
        port=args.port,
        advertised_host=args.advertised_host,
        advertised_port=args.advertised_port,
        data_dir=Path(args.data_dir),
        fsync=FsyncPolicy(args.fsync),
        events=Path(args.events) if args.events else None,
        max_frame_bytes=args.max_frame_bytes,
        connections_max_idle_ms=args.connections_max_idle_ms,
        max_connections=args.max_connections,
        max_connections_per_ip=args.max_connections_per_ip,
        connection_max_in_flight=args.connection_max_in_flight,
        connection_max_queued_bytes=args.connection_max_queued_bytes,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        stats_interval_s=float(args.stats_interval),
        id_limits=_id_limits(args),
        max_partitions_per_topic=args.max_partitions_per_topic,
        max_partitions=args.max_partitions,
        max_open_segment_files=args.max_open_segment_files,
        default_partitions=args.num_partitions,
        auto_create_topics=args.auto_create_topics,
        message_max_bytes=args.message_max_bytes,
        log_retention_check_interval_ms=args.log_retention_check_interval_ms,
        coordinator=_coordinator_config(args),
        transactions=TxnConfig(
            max_timeout_ms=args.transaction_max_timeout_ms, id_expiration_ms=args.transactional_id_expiration_ms
        ),
    )
    if args.message_max_bytes > args.max_frame_bytes:
        raise ServeError(
            f"--message-max-bytes ({args.message_max_bytes}) must not exceed --max-frame-bytes "
            f"({args.max_frame_bytes}): a batch that large could never arrive"
        )
    try:
        return asyncio.run(run_server(config))
    except StartupError as exc:
        raise ServeError(str(exc)) from None
