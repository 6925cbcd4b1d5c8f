"""``regroup serve``: run the Kafka-wire server (group coordinator + embedded partition log) until SIGTERM or
SIGINT. Problems with the arguments or the environment (port in use, unusable data directory, unwritable
events file, a bad value in the configuration file) print one line on stderr and exit with 2; a clean shutdown
exits 0, a failed log write 1.

``--config FILE`` reads Kafka's ``server.properties`` names (``server/properties.py``); a flag given on the
command line overrides the file (each option records whether the user gave it), and the settings either set
are the broker's STATIC_BROKER_CONFIG entries. With ``listeners`` in the file, ``--host``/``--port`` given
explicitly replace the first listener's host and port, ``--advertised-host``/``--advertised-port`` its
advertised ones; without it, the broker has one PLAINTEXT listener on ``--host``:``--port``, as without a file.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from regroup.coordinator.config import (
    SERVER_ASSIGNOR_OFFLOAD_MEMBERS,
    SERVER_CLASSIC_ANSWERS_PER_CALL,
    SERVER_CLASSIC_MEMBERS_PER_CALL,
    SERVER_REGEX_OFFLOAD_NAMES,
)
from regroup.network.limits import CLIENT_ID, DEFAULT_LIMITS, INSTANCE_ID, MEMBER_ID, MEMBER_ID_SUFFIX_BYTES

if TYPE_CHECKING:
    from regroup.coordinator.config import CoordinatorConfig
    from regroup.network.listeners import ListenerConfig
    from regroup.server.app import ServerConfig
    from regroup.server.properties import ServerSettings

LOG_LEVELS = ("debug", "info", "warning", "error")
#: the identifier limits' kinds (``regroup.network.limits``) and their flags' names
_ID_LIMIT_FLAGS = {
    "group id": "group-id",
    "member id": "member-id",
    "group instance id": "instance-id",
    "client id": "client-id",
    "topic name": "topic-name",
    "transactional id": "transactional-id",
}
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
#: the thread switch interval of the server's process (``ServerConfig.switch_interval_s``): Python's 5 ms
#: default lets a busy event loop keep the coordinator's writer waiting, every time the writer's thread needs the
#: interpreter's lock back (waking, after each write or fsync, to report). 1 ms cut a healthy member's heartbeat
#: p99 beside a ConsumerGroupDescribe of 10,000 members from 166 to 41 ms; 0.2 ms cut it beside DescribeGroups of
#: 1,000 groups from 63 to about 20 ms, at no cost in heartbeats per second (docs/benchmarks.md)
SERVE_SWITCH_INTERVAL_S = 0.0002
#: the server's process runs the cyclic collector on its young generation only, every this many net container
#: allocations, freezing the survivors (``ServerConfig.gc_young_threshold``, ``server/young_gc.py``): Python's
#: middle and oldest generations walk the survivors of many young collections, or the whole heap, at once (a
#: 10,000-member rebalance's parked requests: 50–100 ms; docs/benchmarks.md, "Young collections only")
SERVE_GC_YOUNG_THRESHOLD = 10_000
#: the options whose setting has a Kafka name: option (argparse dest) -> Kafka's name (``--host`` and
#: ``--port`` are ``listeners``, the advertised ones ``advertised.listeners``: see ``server_config``)
KAFKA_NAMES = {
    "data_dir": "log.dirs",
    "initial_rebalance_delay_ms": "group.initial.rebalance.delay.ms",
    "max_frame_bytes": "socket.request.max.bytes",
    "connections_max_idle_ms": "connections.max.idle.ms",
    "max_connections": "max.connections",
    "max_connections_per_ip": "max.connections.per.ip",
    "consumer_heartbeat_interval_ms": "group.consumer.heartbeat.interval.ms",
    "consumer_session_timeout_ms": "group.consumer.session.timeout.ms",
    "consumer_max_size": "group.consumer.max.size",
    "consumer_assignors": "group.consumer.assignors",
    "migration_policy": "group.consumer.migration.policy",
    "consumer_assignor_offload": "group.consumer.assignor.offload.enable",
    "consumer_assignment_interval_ms": "group.consumer.assignment.interval.ms",
    "consumer_min_assignment_interval_ms": "group.consumer.min.assignment.interval.ms",
    "consumer_max_assignment_interval_ms": "group.consumer.max.assignment.interval.ms",
    "share_groups": "group.share.enable",
    "share_heartbeat_interval_ms": "group.share.heartbeat.interval.ms",
    "share_session_timeout_ms": "group.share.session.timeout.ms",
    "share_max_size": "group.share.max.size",
    "share_record_lock_duration_ms": "group.share.record.lock.duration.ms",
    "share_min_record_lock_duration_ms": "group.share.min.record.lock.duration.ms",
    "share_max_record_lock_duration_ms": "group.share.max.record.lock.duration.ms",
    "share_assignment_interval_ms": "group.share.assignment.interval.ms",
    "share_min_assignment_interval_ms": "group.share.min.assignment.interval.ms",
    "share_max_assignment_interval_ms": "group.share.max.assignment.interval.ms",
    "share_delivery_count_limit": "group.share.delivery.count.limit",
    "share_partition_max_record_locks": "group.share.partition.max.record.locks",
    "share_max_sessions": "group.share.max.share.sessions",
    "num_partitions": "num.partitions",
    "auto_create_topics": "auto.create.topics.enable",
    "message_max_bytes": "message.max.bytes",
    "log_retention_check_interval_ms": "log.retention.check.interval.ms",
    "transaction_max_timeout_ms": "transaction.max.timeout.ms",
    "transactional_id_expiration_ms": "transactional.id.expiration.ms",
}
_LISTENER_OPTIONS = {
    "host": "listeners",
    "port": "listeners",
    "advertised_host": "advertised.listeners",
    "advertised_port": "advertised.listeners",
}
#: the namespace attribute holding the dests of the options given on the command line
GIVEN = "serve_given"
#: the namespace attribute holding, for each option the configuration file set, its Kafka name
FROM_FILE = "serve_from_file"


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


def _mark_given(namespace: argparse.Namespace, dest: str) -> None:
    given: set[str] | None = getattr(namespace, GIVEN, None)
    if given is None:
        given = set()
        setattr(namespace, GIVEN, given)
    given.add(dest)


class _GivenStore(argparse._StoreAction):
    """``store``, remembering that the user gave the option (so that it overrides the configuration file)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        super().__call__(parser, namespace, values, option_string)
        _mark_given(namespace, self.dest)


class _GivenBoolean(argparse.BooleanOptionalAction):
    """``--x`` / ``--no-x``, remembering that the user gave one."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        super().__call__(parser, namespace, values, option_string)
        _mark_given(namespace, self.dest)


def given_options(args: argparse.Namespace) -> set[str]:
    """The dests of the options given on the command line."""
    return set(getattr(args, GIVEN, None) or ())


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "serve",
        help="run the Kafka-wire group coordinator server",
        usage="%(prog)s [-h] [--config FILE] [OPTION ...]",
        description="Serve the Kafka protocol (group coordination, offsets, embedded topics) on one node. "
        "Every setting has a default; --config FILE gives them under Kafka's names.",
    )
    parser.register("action", None, _GivenStore)
    parser.register("action", "store", _GivenStore)
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="Kafka's server.properties: its names for the settings below (num.partitions, log.dirs, ...), "
        "listeners with TLS and SASL (ssl.*, sasl.*, listener.name.<l>.*) and ACLs (authorizer.class.name, "
        "super.users); unsupported names are a warning. A flag given overrides the file; with listeners in the "
        "file, --host/--port given replace the first listener's host and port, --advertised-host/"
        "--advertised-port its advertised ones",
    )
    _listener_options(parser)
    _connection_options(parser)
    _storage_options(parser)
    _logging_options(parser)
    classic = parser.add_argument_group("classic groups")
    classic.add_argument(
        "--initial-rebalance-delay-ms",
        type=_int_at_least(0),
        default=3000,
        metavar="MS",
        help="group.initial.rebalance.delay.ms: wait this long for more members before a new group's first "
        "rebalance (default 3000)",
    )
    _consumer_group_options(parser)
    _share_group_options(parser)
    _topic_options(parser)
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


def _listener_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "listeners and security",
        "one PLAINTEXT listener from these flags; several listeners, TLS, SASL and ACLs come from --config "
        "(see docs/security.md)",
    )
    group.add_argument("--host", default="127.0.0.1", metavar="HOST", help="address to listen on (default 127.0.0.1)")
    group.add_argument(
        "--port",
        type=_int_at_least(0, 65535),
        default=9092,
        metavar="PORT",
        help="port to listen on (default 9092; 0 = any free)",
    )
    group.add_argument(
        "--advertised-host", metavar="HOST", help="host name FindCoordinator/Metadata tell clients (default: --host)"
    )
    group.add_argument(
        "--advertised-port",
        type=_int_at_least(1, 65535),
        metavar="PORT",
        help="port FindCoordinator/Metadata tell clients, e.g. a proxy's (default: the port listened on)",
    )


def _connection_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connections and their limits")
    group.add_argument(
        "--event-loop",
        choices=("auto", "uvloop", "asyncio"),
        default="auto",
        help="the event loop serving connections: uvloop (markedly cheaper TLS and small requests), asyncio's own, "
        "or auto: uvloop where installed (default auto)",
    )
    group.add_argument(
        "--max-frame-bytes",
        type=_int_at_least(1),
        default=100 * 1024 * 1024,
        metavar="BYTES",
        help="socket.request.max.bytes: largest request accepted; bigger closes the connection (default 104857600)",
    )
    group.add_argument(
        "--connections-max-idle-ms",
        type=_int_at_least(1),
        default=600_000,
        metavar="MS",
        help="connections.max.idle.ms: close connections idle longer than this (default 600000)",
    )
    group.add_argument(
        "--max-connections",
        type=_int_at_least(1),
        default=10_000,
        metavar="N",
        help="max.connections: most client connections open at once; more are closed when accepted "
        "(default 10000, capped by the open-file limit)",
    )
    group.add_argument(
        "--max-connections-per-ip",
        type=_int_at_least(1),
        default=5_000,
        metavar="N",
        help="max.connections.per.ip: most client connections open from one address (default 5000)",
    )
    group.add_argument(
        "--connection-max-in-flight",
        type=_int_at_least(1),
        default=64,
        metavar="N",
        help="requests of one connection waiting for a parked or earlier request; at the limit the server "
        "stops reading that connection (default 64)",
    )
    group.add_argument(
        "--connection-max-queued-bytes",
        type=_int_at_least(1),
        default=1024 * 1024,
        metavar="BYTES",
        help="response bytes of one connection not yet taken by its socket; past it the server stops reading "
        "that connection until its client reads (default 1048576)",
    )


def _storage_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("storage")
    group.add_argument(
        "--data-dir",
        default="./regroup-data",
        metavar="DIR",
        help="log.dirs: where the logs live, created if missing (default ./regroup-data)",
    )
    group.add_argument(
        "--fsync",
        choices=("always", "interval", "never"),
        default="always",
        help="when appended records reach stable storage (default always: before any response)",
    )


def _logging_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("logging and metrics", "see docs/operations.md")
    group.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="logging level (default info)")
    group.add_argument(
        "--events", metavar="FILE", help="append group state changes as JSON lines to FILE (default: none)"
    )
    group.add_argument(
        "--stats-interval",
        type=_int_at_least(1),
        default=60,
        metavar="SECONDS",
        help="log request counts and rates per API every SECONDS (default 60)",
    )
    group.add_argument(
        "--stall-warn-ms",
        type=_int_at_least(0),
        default=100,
        metavar="MS",
        help=(
            "log (warning) and count every turn of the event loop longer than MS, naming the request that held "
            "it (default 100; 0 = off)"
        ),
    )
    group.add_argument(
        "--http-port",
        type=_int_at_least(0, 65535),
        metavar="PORT",
        help=(
            "serve the HTTP console at http://HOST:PORT/: the dashboard, its JSON under /api/, the live group "
            "events (/api/events) and Prometheus metrics (/metrics) (default: off; 0 = any free port)"
        ),
    )
    group.add_argument(
        "--http-host",
        metavar="HOST",
        help=(
            "address of the HTTP console (default 127.0.0.1: loopback, whatever the listeners); another address "
            "needs SASL on the listeners (the console then asks for HTTP Basic authentication) or --http-insecure"
        ),
    )
    group.add_argument(
        "--http-insecure",
        action="store_true",
        help="serve the HTTP console on an address that is not loopback although no listener uses SASL (default off)",
    )
    group.add_argument(
        "--history-window",
        type=duration_ms,
        default="24h",  # (argparse applies the type to a string default)
        metavar="DURATION",
        help=(
            "how long the HTTP console keeps each group's rebalance timeline, in memory and under the data "
            "directory's history/: milliseconds, or a number with ms, s, m, h or d (default 24h; 0 = no history)"
        ),
    )
    group.add_argument(
        "--metrics-port",
        type=_int_at_least(0, 65535),
        metavar="PORT",
        help="the older name of --http-port (the same server; metrics at http://HOST:PORT/metrics)",
    )
    group.add_argument("--metrics-host", metavar="HOST", help="the older name of --http-host")


def _consumer_group_options(parser: argparse.ArgumentParser) -> None:
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
        "(default uniform,server-range; also optimal, consistent-hash; Kafka's name range is accepted for "
        "server-range)",
    )
    consumer.add_argument(
        "--consumer-assignor-offload",
        action=_GivenBoolean,
        default=True,
        help="group.consumer.assignor.offload.enable: compute a large consumer group's target on a worker thread, "
        "its members heartbeating against the last one meanwhile, instead of within the heartbeat that needs it "
        "(default on)",
    )
    consumer.add_argument(
        "--consumer-assignor-offload-members",
        type=_int_at_least(1),
        default=SERVER_ASSIGNOR_OFFLOAD_MEMBERS,
        metavar="N",
        help="the fewest members of a consumer group whose target is computed on the worker thread (default "
        f"{SERVER_ASSIGNOR_OFFLOAD_MEMBERS}; a smaller group's takes a few milliseconds)",
    )
    consumer.add_argument(
        "--consumer-assignment-interval-ms",
        type=_int_at_least(0),
        default=0,
        metavar="MS",
        help="group.consumer.assignment.interval.ms (KIP-1263): the least time between two target computations "
        "of a consumer group, the changes meanwhile taken together (default 0: at once; Kafka 4.3's is 1000)",
    )
    consumer.add_argument(
        "--consumer-min-assignment-interval-ms",
        type=_int_at_least(0),
        default=0,
        metavar="MS",
        help="group.consumer.min.assignment.interval.ms: the shortest consumer.assignment.interval.ms a group may "
        "set (default 0)",
    )
    consumer.add_argument(
        "--consumer-max-assignment-interval-ms",
        type=_int_at_least(0),
        default=15_000,
        metavar="MS",
        help="group.consumer.max.assignment.interval.ms: the longest consumer.assignment.interval.ms a group may "
        "set (default 15000)",
    )
    consumer.add_argument(
        "--migration-policy",
        choices=("disabled", "upgrade", "downgrade", "bidirectional"),
        default="bidirectional",
        help="group.consumer.migration.policy: online conversion between classic and consumer groups "
        "(default bidirectional)",
    )


def _share_group_options(parser: argparse.ArgumentParser) -> None:
    share = parser.add_argument_group("KIP-932 share groups", "see docs/share-groups.md")
    share.add_argument(
        "--share-groups",
        action=_GivenBoolean,
        default=True,
        help="group.share.enable: serve share groups (default on, as a Kafka 4.2 cluster with share.version=1; "
        "off: every share-group request is UNSUPPORTED_VERSION)",
    )
    share.add_argument(
        "--share-heartbeat-interval-ms",
        type=_int_at_least(1),
        default=5_000,
        metavar="MS",
        help="group.share.heartbeat.interval.ms: how often share members heartbeat (default 5000)",
    )
    share.add_argument(
        "--share-session-timeout-ms",
        type=_int_at_least(1),
        default=45_000,
        metavar="MS",
        help="group.share.session.timeout.ms: a silent share member is fenced after this (default 45000)",
    )
    share.add_argument(
        "--share-max-size",
        type=_int_at_least(1, 1000),
        default=200,
        metavar="N",
        help="group.share.max.size: most members in one share group (default 200)",
    )
    share.add_argument(
        "--share-record-lock-duration-ms",
        type=_int_at_least(1000, 3_600_000),
        default=30_000,
        metavar="MS",
        help="group.share.record.lock.duration.ms: how long an acquired record stays locked (default 30000)",
    )
    share.add_argument(
        "--share-min-record-lock-duration-ms",
        type=_int_at_least(1000, 30_000),
        default=15_000,
        metavar="MS",
        help="group.share.min.record.lock.duration.ms: the shortest share.record.lock.duration.ms a group may "
        "set (default 15000)",
    )
    share.add_argument(
        "--share-max-record-lock-duration-ms",
        type=_int_at_least(30_000, 3_600_000),
        default=60_000,
        metavar="MS",
        help="group.share.max.record.lock.duration.ms: the longest share.record.lock.duration.ms a group may "
        "set (default 60000)",
    )
    share.add_argument(
        "--share-assignment-interval-ms",
        type=_int_at_least(0),
        default=0,
        metavar="MS",
        help="group.share.assignment.interval.ms (KIP-1263): the least time between two target computations of a "
        "share group (default 0: at once; Kafka 4.3's is 1000)",
    )
    share.add_argument(
        "--share-min-assignment-interval-ms",
        type=_int_at_least(0),
        default=0,
        metavar="MS",
        help="group.share.min.assignment.interval.ms: the shortest share.assignment.interval.ms a group may set "
        "(default 0)",
    )
    share.add_argument(
        "--share-max-assignment-interval-ms",
        type=_int_at_least(0),
        default=15_000,
        metavar="MS",
        help="group.share.max.assignment.interval.ms: the longest share.assignment.interval.ms a group may set "
        "(default 15000)",
    )
    share.add_argument(
        "--share-delivery-count-limit",
        type=_int_at_least(2, 10),
        default=5,
        metavar="N",
        help="group.share.delivery.count.limit: deliveries of a record before it is archived (default 5)",
    )
    share.add_argument(
        "--share-partition-max-record-locks",
        type=_int_at_least(100, 10_000),
        default=2_000,
        metavar="N",
        help="group.share.partition.max.record.locks: records in flight per share partition (default 2000)",
    )
    share.add_argument(
        "--share-max-sessions",
        type=_int_at_least(1),
        default=2_000,
        metavar="N",
        help="group.share.max.share.sessions: share sessions open on the broker at once (default 2000)",
    )


def _topic_options(parser: argparse.ArgumentParser) -> None:
    topics = parser.add_argument_group("embedded topics", "see docs/topic-data.md")
    topics.add_argument(
        "--num-partitions",
        type=_int_at_least(1),
        default=1,
        metavar="N",
        help="num.partitions: partitions of a topic created automatically or without a count (default 1)",
    )
    topics.add_argument(
        "--auto-create-topics",
        action=_GivenBoolean,
        default=True,
        help="auto.create.topics.enable: Metadata creates a missing topic a client asks for (default on)",
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


def _label(args: argparse.Namespace, dest: str) -> str:
    """How an error names the setting of option ``dest``: its Kafka name when the configuration file set it,
    else the flag."""
    from_file: dict[str, str] = getattr(args, FROM_FILE, None) or {}
    return from_file.get(dest) or "--" + dest.replace("_", "-")


def _coordinator_config(args: argparse.Namespace) -> CoordinatorConfig:
    """The coordinator's settings from the flags (and the configuration file); inconsistent ones are a
    ``ServeError``."""
    from regroup.assignors import registry
    from regroup.coordinator.config import CoordinatorConfig
    from regroup.coordinator.consumer.target import SERVER_ASSIGNORS

    heartbeat_ms, session_ms = args.consumer_heartbeat_interval_ms, args.consumer_session_timeout_ms
    if heartbeat_ms >= session_ms:
        raise ServeError(
            f"{_label(args, 'consumer_heartbeat_interval_ms')} ({heartbeat_ms}) must be less than "
            f"{_label(args, 'consumer_session_timeout_ms')} ({session_ms})"
        )
    named = [name.strip() for name in args.consumer_assignors.split(",") if name.strip()]
    ours = [registry.server_side_name(name) for name in named]
    assignors = tuple(registry.wire_name(name) for name in ours if name is not None)  # the names clients send
    known = set(assignors) <= SERVER_ASSIGNORS.keys()
    if not named or None in ours or len(set(assignors)) != len(assignors) or not known:
        raise ServeError(
            f"{_label(args, 'consumer_assignors')} {args.consumer_assignors!r}: name each of "
            f"{', '.join(registry.SERVER_SIDE)} at most once, at least one (range = server-range)"
        )
    extra: dict[str, int] = {}
    if args.consumer_max_size is not None:
        extra["consumer_group_max_size"] = args.consumer_max_size
    if args.consumer_assignor_offload:
        extra["consumer_group_assignor_offload_members"] = args.consumer_assignor_offload_members
    for kind in ("consumer", "share"):
        low, interval, high = (getattr(args, f"{kind}_{m}assignment_interval_ms") for m in ("min_", "", "max_"))
        if not low <= interval <= high:
            raise ServeError(
                f"{_label(args, f'{kind}_assignment_interval_ms')} ({interval}) must be within "
                f"{_label(args, f'{kind}_min_assignment_interval_ms')} ({low}) and "
                f"{_label(args, f'{kind}_max_assignment_interval_ms')} ({high})"
            )
    if args.share_heartbeat_interval_ms >= args.share_session_timeout_ms:
        raise ServeError(
            f"{_label(args, 'share_heartbeat_interval_ms')} ({args.share_heartbeat_interval_ms}) must be less than "
            f"{_label(args, 'share_session_timeout_ms')} ({args.share_session_timeout_ms})"
        )
    return CoordinatorConfig(
        share_group_heartbeat_interval_ms=args.share_heartbeat_interval_ms,
        share_group_session_timeout_ms=args.share_session_timeout_ms,
        share_group_max_size=args.share_max_size,
        share_group_record_lock_duration_ms=args.share_record_lock_duration_ms,
        share_group_min_record_lock_duration_ms=args.share_min_record_lock_duration_ms,
        share_group_max_record_lock_duration_ms=args.share_max_record_lock_duration_ms,
        share_group_delivery_count_limit=args.share_delivery_count_limit,
        share_group_partition_max_record_locks=args.share_partition_max_record_locks,
        share_group_assignment_interval_ms=args.share_assignment_interval_ms,
        share_group_min_assignment_interval_ms=args.share_min_assignment_interval_ms,
        share_group_max_assignment_interval_ms=args.share_max_assignment_interval_ms,
        group_initial_rebalance_delay_ms=args.initial_rebalance_delay_ms,
        consumer_group_heartbeat_interval_ms=heartbeat_ms,
        consumer_group_session_timeout_ms=session_ms,
        consumer_group_assignors=assignors,
        consumer_group_migration_policy=args.migration_policy,
        consumer_group_assignment_interval_ms=args.consumer_assignment_interval_ms,
        consumer_group_min_assignment_interval_ms=args.consumer_min_assignment_interval_ms,
        consumer_group_max_assignment_interval_ms=args.consumer_max_assignment_interval_ms,
        consumer_group_regex_offload_names=SERVER_REGEX_OFFLOAD_NAMES,
        classic_answers_per_call=SERVER_CLASSIC_ANSWERS_PER_CALL,
        classic_members_per_call=SERVER_CLASSIC_MEMBERS_PER_CALL,
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


def _apply_file(args: argparse.Namespace) -> ServerSettings | None:
    """Read ``--config`` and give every option the user did not give the file's value; ``None`` without a
    file. A file that cannot be read or holds a bad value is a ``ServeError``."""
    from regroup.server.properties import PropertiesError, load_properties, server_settings

    if args.config is None:
        return None
    try:
        settings = server_settings(load_properties(Path(args.config)))
    except PropertiesError as exc:
        message = str(exc)
        raise ServeError(message if message.startswith("cannot read") else f"{args.config}: {message}") from None
    given, from_file = given_options(args), {}
    for dest, kafka_name in KAFKA_NAMES.items():
        if dest not in given and kafka_name in settings.flag_values:
            setattr(args, dest, settings.flag_values[kafka_name])
            from_file[dest] = kafka_name
    setattr(args, FROM_FILE, from_file)
    return settings


def _listeners(args: argparse.Namespace, file: ServerSettings | None) -> tuple[ListenerConfig, ...]:
    """The file's listeners, the first one's addresses replaced by the listener flags given; ``()`` (one
    PLAINTEXT listener on --host:--port) without ``listeners`` in the file."""
    listeners: tuple[ListenerConfig, ...] = () if file is None else file.fields.get("listeners", ())
    if not listeners:
        return ()
    given, first = given_options(args), listeners[0]
    changes = {dest: getattr(args, dest) for dest in _LISTENER_OPTIONS if dest in given}
    return (dataclasses.replace(first, **changes), *listeners[1:]) if changes else listeners


_DURATION_UNITS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_ms(text: str) -> int:
    """A duration as milliseconds: ``90000``, ``500ms``, ``90s``, ``15m``, ``24h``, ``7d`` (argparse type)."""
    raw = text.strip().lower()
    unit = next((u for u in ("ms", "s", "m", "h", "d") if raw.endswith(u)), "")
    number = raw[: len(raw) - len(unit)]
    if not number.isdigit():
        raise argparse.ArgumentTypeError(f"not a duration (milliseconds, or a number with ms, s, m, h or d): {text!r}")
    return int(number) * _DURATION_UNITS.get(unit, 1)


def _one_of(args: argparse.Namespace, dest: str, older: str) -> Any:
    """The value of ``--http-...`` or of its older name ``--metrics-...``; both given and different is a
    ``ServeError`` (one server has one port and one address)."""
    value, old = getattr(args, dest), getattr(args, older)
    if value is not None and old is not None and value != old:
        flag, old_flag = "--" + dest.replace("_", "-"), "--" + older.replace("_", "-")
        raise ServeError(f"{flag} {value} and {old_flag} {old} differ: {old_flag} is the older name of {flag}")
    return value if value is not None else old


def server_config(args: argparse.Namespace) -> tuple[ServerConfig, tuple[str, ...]]:
    """The server's settings from the flags and the configuration file (``--config``), and the file's warnings
    (one line each, for the caller to log once every check has passed); anything wrong is a ``ServeError``."""
    from regroup.server.app import ServerConfig
    from regroup.storage.record_log import FsyncPolicy
    from regroup.transactions.results import TxnConfig

    file = _apply_file(args)
    given = given_options(args)
    configured = set() if file is None else set(file.configured)
    configured |= {KAFKA_NAMES[dest] for dest in given if dest in KAFKA_NAMES}
    configured |= {_LISTENER_OPTIONS[dest] for dest in given if dest in _LISTENER_OPTIONS}
    listeners = _listeners(args, file)
    extra = {} if file is None else {k: v for k, v in file.fields.items() if k != "listeners"}
    address: Any = listeners[0] if listeners else args  # the first listener's, or the flags'
    config = ServerConfig(
        freeze_loaded=True,  # this process is the one server
        switch_interval_s=SERVE_SWITCH_INTERVAL_S,
        gc_young_threshold=SERVE_GC_YOUNG_THRESHOLD,
        host=address.host,
        port=address.port,
        advertised_host=address.advertised_host,
        advertised_port=address.advertised_port,
        data_dir=Path(args.data_dir),
        fsync=FsyncPolicy(args.fsync),
        events=Path(args.events) if args.events else None,
        max_frame_bytes=args.max_frame_bytes,
        connections_max_idle_ms=args.connections_max_idle_ms,
        max_connections=args.max_connections,
        max_connections_per_ip=args.max_connections_per_ip,
        connection_max_in_flight=args.connection_max_in_flight,
        connection_max_queued_bytes=args.connection_max_queued_bytes,
        http_port=_one_of(args, "http_port", "metrics_port"),
        http_host=_one_of(args, "http_host", "metrics_host"),
        http_insecure=args.http_insecure,
        history_window_ms=args.history_window,
        stats_interval_s=float(args.stats_interval),
        stall_warn_ms=args.stall_warn_ms,
        id_limits=_id_limits(args),
        max_partitions_per_topic=args.max_partitions_per_topic,
        max_partitions=args.max_partitions,
        max_open_segment_files=args.max_open_segment_files,
        default_partitions=args.num_partitions,
        auto_create_topics=args.auto_create_topics,
        message_max_bytes=args.message_max_bytes,
        log_retention_check_interval_ms=args.log_retention_check_interval_ms,
        coordinator=_coordinator_config(args),
        share_groups=args.share_groups,
        share_max_sessions=args.share_max_sessions,
        transactions=TxnConfig(
            max_timeout_ms=args.transaction_max_timeout_ms, id_expiration_ms=args.transactional_id_expiration_ms
        ),
        listeners=listeners,
        configured=frozenset(configured),
        **extra,
    )
    if config.data_dir.exists() and not config.data_dir.is_dir():
        raise ServeError(f"{_label(args, 'data_dir')} {args.data_dir}: not a directory")
    if args.message_max_bytes > args.max_frame_bytes:
        raise ServeError(
            f"{_label(args, 'message_max_bytes')} ({args.message_max_bytes}) must not exceed "
            f"{_label(args, 'max_frame_bytes')} ({args.max_frame_bytes}): a batch that large could never arrive"
        )
    return config, tuple(f"{args.config}: {warning}" for warning in (() if file is None else file.warnings))


def event_loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The loop ``--event-loop`` names. uvloop (a dependency on Linux and macOS) costs markedly less CPU for TLS and
    many small requests (docs/benchmarks.md, "Server: security"); ``auto`` falls back to asyncio's own loop where
    uvloop is not installed, ``uvloop`` refuses to start without it. None means asyncio's default loop."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ServeError("--event-loop uvloop: uvloop is not installed (pip install uvloop)") from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(args: argparse.Namespace) -> int:
    from regroup.server.app import StartupError
    from regroup.server.app import run as run_server
    from regroup.server.properties import log as properties_log

    logging.basicConfig(level=args.log_level.upper(), format=LOG_FORMAT, stream=sys.stderr)
    config, warnings = server_config(args)
    loop_factory = event_loop_factory(args.event_loop)
    for warning in warnings:  # once, after every check passed
        properties_log.warning("%s", warning)
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(run_server(config))
    except StartupError as exc:
        raise ServeError(str(exc)) from None
