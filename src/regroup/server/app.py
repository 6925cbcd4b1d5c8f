"""The server process: opens the data directory (coordinator log, partition log), rebuilds the coordinator,
listens, serves every connection with the registered handlers, logs request rates periodically and rebalance
events as they happen, serves the operator's console — the dashboard, its JSON, the live group events and the
Prometheus metrics — on ``--http-port`` (``--metrics-port`` is the same server), and shuts down cleanly (stop
accepting, drop connections, flush and close the logs) when asked or when the log fails.

Data directory layout: ``coordinator/`` holds the coordinator's record log (docs/storage.md), ``topics/`` the
embedded partition log (``server/topics.py``; an in-memory stand-in while that module is not installed),
``transactions/`` the transaction coordinator's record log (``server/txn_runtime.py``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import gc
import ipaddress
import itertools
import logging
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from regroup.console.auth import BasicAuth
from regroup.console.http import HttpServer
from regroup.console.routes import Console
from regroup.console.sse import EventHub
from regroup.coordinator.config import (
    SERVER_ASSIGNOR_OFFLOAD_MEMBERS,
    SERVER_CLASSIC_ANSWERS_PER_CALL,
    SERVER_CLASSIC_MEMBERS_PER_CALL,
    SERVER_REGEX_OFFLOAD_NAMES,
    CoordinatorConfig,
)
from regroup.coordinator.result import Result
from regroup.network.admission import DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_IP, AcceptErrors, Admission
from regroup.network.authentication import ListenerSecurity, SecurityConfigError
from regroup.network.connection import (
    DEFAULT_MAX_IDLE_MS,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_QUEUED_BYTES,
    Connection,
    prepare_ordered_versions,
)
from regroup.network.framing import DEFAULT_MAX_FRAME_BYTES
from regroup.network.limits import DEFAULT_LIMITS
from regroup.network.listeners import ListenerConfig, default_listener
from regroup.network.turn_budget import TurnBudget
from regroup.security.authorizer import Authorizer
from regroup.server.acl_store import ACL_FILE, AclStore
from regroup.server.api import ApiSpec, TopicStore
from regroup.server.broker_configs import BrokerConfigEntry, broker_config_entries
from regroup.server.dispatch import Dispatcher
from regroup.server.events import GroupEvents
from regroup.server.group_configs import GROUP_CONFIG_FILE, GroupConfigStore, core_group_configs
from regroup.server.handlers.registry import load_specs
from regroup.server.handlers.share_fetch import release_share_member
from regroup.server.history_feed import DEFAULT_WINDOW_MS, HistoryFeed
from regroup.server.image import ImageFeed
from regroup.server.log_cleaner import DEFAULT_CHECK_INTERVAL_MS, LogCleaner, log_report
from regroup.server.metrics import RequestMetrics
from regroup.server.operator_view import ServerView
from regroup.server.rebalances import RebalanceLog
from regroup.server.replays import Replays
from regroup.server.runtime import CoordinatorRuntime, Uuid4Ids, wall_ms
from regroup.server.scram_store import SCRAM_CREDENTIALS_FILE, ScramStore
from regroup.server.scrape import ScrapeSources, scrape
from regroup.server.share_sessions import ShareSessions
from regroup.server.topics import DEFAULT_MAX_PARTITIONS, DEFAULT_MAX_PARTITIONS_PER_TOPIC
from regroup.server.topics import TopicStore as PartitionTopicStore
from regroup.server.txn_runtime import TransactionRuntime
from regroup.server.watchdog import DEFAULT_STALL_WARN_MS, StallWatchdog
from regroup.server.young_gc import YoungCollector
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.format import CorruptLogError, StorageError
from regroup.storage.handles import DEFAULT_CAPACITY, capacity_for_limit
from regroup.storage.record_log import FsyncPolicy, LogLockedError
from regroup.storage.topic_config import DEFAULT_MESSAGE_MAX_BYTES, DEFAULT_SEGMENT_BYTES
from regroup.storage.transaction_log import TransactionLog
from regroup.transactions.results import TxnConfig

#: how often ``regroup serve``'s young-only collector reads the heap's size (``YoungCollector.check``)
RECLAIM_CHECK_S = 1.0
#: how often it counts the young generation's objects, collecting them when too many (``YoungCollector.measure``)
YOUNG_CHECK_S = 0.02
log = logging.getLogger("regroup.server")

#: where the HTTP console (and its /metrics) listens unless --http-host says otherwise
LOOPBACK = "127.0.0.1"
T = TypeVar("T")


class StartupError(Exception):
    """The server cannot start with what it was given (port in use, unusable data directory, ...)."""


class DataDirInUseError(StartupError):
    """Another process holds the data directory's lock."""


#: the coordinator settings of a server built without any (``regroup serve``'s defaults)
SERVER_COORDINATOR = CoordinatorConfig(
    consumer_group_assignor_offload_members=SERVER_ASSIGNOR_OFFLOAD_MEMBERS,
    consumer_group_regex_offload_names=SERVER_REGEX_OFFLOAD_NAMES,
    classic_answers_per_call=SERVER_CLASSIC_ANSWERS_PER_CALL,
    classic_members_per_call=SERVER_CLASSIC_MEMBERS_PER_CALL,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    data_dir: Path = Path("regroup-data")
    fsync: FsyncPolicy = FsyncPolicy.ALWAYS
    events: Path | None = None
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    connections_max_idle_ms: int = DEFAULT_MAX_IDLE_MS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_ip: int = DEFAULT_MAX_CONNECTIONS_PER_IP
    connection_max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    connection_max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES
    stats_interval_s: float = 60.0
    #: a turn of the event loop longer than this is logged and counted (``server/watchdog.py``); 0: not watched
    stall_warn_ms: int = DEFAULT_STALL_WARN_MS
    #: the HTTP console's port (dashboard, /api, /metrics); None: no HTTP server, 0: any free port
    http_port: int | None = None
    #: its address (None: 127.0.0.1)
    http_host: str | None = None
    #: serve the console on an address that is not loopback although no listener authenticates (no SASL)
    http_insecure: bool = False
    #: how long the rebalance history (the console's timelines) is kept, in memory and under ``history/``; 0: no
    #: history (with the HTTP console only)
    history_window_ms: int = DEFAULT_WINDOW_MS
    #: the older names of ``http_port`` and ``http_host`` (``--metrics-port``, ``--metrics-host``), used when those
    #: are not set
    metrics_port: int | None = None
    metrics_host: str | None = None
    #: move everything loaded at start out of the cyclic collector's sight (``gc.freeze``): for a process that
    #: is this one server (``regroup serve``), not for one that starts servers and must collect their cycles
    freeze_loaded: bool = False
    #: the interpreter's thread switch interval (``sys.setswitchinterval``) for a process that is this one server;
    #: None leaves it. The event loop shares the interpreter's lock with the worker threads (the coordinator's
    #: writer, the decoding thread, fsyncs); at Python's 5 ms a worker that needs the lock a few times per
    #: append waits up to 5 ms each time behind a loop busy encoding, and every request queued behind that
    #: append waits with it
    switch_interval_s: float | None = None
    #: for a process that is this one server: the cyclic garbage collector runs on the young generation only,
    #: every this many net container allocations, and freezes what survives (``server/young_gc.py``); None leaves
    #: the collector as it is. Python's own generations walk the survivors of many young collections at once (a
    #: large rebalance's parked requests: 50–100 ms), and the whole heap in a full collection
    gc_young_threshold: int | None = None
    snapshot_every: int = 100_000
    auto_create_topics: bool = True
    default_partitions: int = 1
    #: identifier kind (``precheck.ID_KINDS``) -> most bytes a request may carry
    id_limits: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    max_partitions_per_topic: int = DEFAULT_MAX_PARTITIONS_PER_TOPIC
    max_partitions: int = DEFAULT_MAX_PARTITIONS
    #: segment files held open at once (lowered to a quarter of the descriptor limit, RLIMIT_NOFILE)
    max_open_segment_files: int = DEFAULT_CAPACITY
    #: message.max.bytes: the largest batch a topic without max.message.bytes accepts
    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    #: log.segment.bytes: the segment size of topics without segment.bytes
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    #: log.retention.check.interval.ms: how often retention, segment.ms and compaction run
    log_retention_check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS
    #: broker.rack: this broker's rack, so every replica's (None: no rack)
    broker_rack: str | None = None
    #: the coordinator's settings; a large consumer group's target is computed beside it by default
    coordinator: CoordinatorConfig = field(default_factory=lambda: SERVER_COORDINATOR)
    transactions: TxnConfig = field(default_factory=TxnConfig)
    #: serve share groups (``group.share.enable``; off: every share-group request is UNSUPPORTED_VERSION)
    share_groups: bool = True
    #: ``group.share.max.share.sessions``
    share_max_sessions: int = 2_000
    #: the listeners (``network/listeners.py``); empty: one PLAINTEXT listener on ``host``:``port``
    listeners: tuple[ListenerConfig, ...] = ()
    #: authorizer.class.name as given (Kafka's StandardAuthorizer or AclAuthorizer); None: no authorization
    authorizer: str | None = None
    #: super.users: principals (``User:alice``) every check allows
    super_users: frozenset[str] = frozenset()
    #: allow.everyone.if.no.acl.found
    allow_everyone_if_no_acl_found: bool = False
    #: the Kafka names of the settings a configuration file or a flag set (DescribeConfigs shows them as
    #: STATIC_BROKER_CONFIG; the others as DEFAULT_CONFIG)
    configured: frozenset[str] = frozenset()


@dataclass(slots=True)
class ServerBroker:
    """What the handlers see (``regroup.server.api.Broker``)."""

    host: str
    port: int
    topic_store: TopicStore
    coordinator: CoordinatorRuntime
    api_specs: dict[int, ApiSpec]
    auto_create_topics: bool = True
    default_partitions: int = 1
    #: the broker's settings as DescribeConfigs shows them (resource BROKER "0")
    broker_configs: Mapping[str, BrokerConfigEntry] = field(default_factory=dict)
    transactions: TransactionRuntime | None = None
    #: the groups' own configurations (resource GROUP)
    group_configs: GroupConfigStore | None = None
    #: listener name -> the host and port Metadata, FindCoordinator and DescribeCluster advertise on it
    endpoints: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    #: the SCRAM credentials (DescribeUserScramCredentials, AlterUserScramCredentials, SCRAM exchanges)
    scram: ScramStore | None = None
    #: the ACLs (None: no authorizer configured: every ACL API answers SECURITY_DISABLED)
    acls: AclStore | None = None
    #: what every handler asks (``server/authz.py``); None: everything is allowed
    authorizer: Authorizer | None = None
    #: the share consumers' fetch sessions (``server/share_sessions.py``)
    share_sessions: ShareSessions = field(default_factory=ShareSessions)
    #: share groups are served (``group.share.enable``)
    share_groups: bool = True
    #: ``broker.rack`` (Metadata and DescribeCluster report it)
    rack: str | None = None

    def endpoint(self, listener: str) -> tuple[str, int]:
        """The broker's address as clients that came in through ``listener`` must reach it."""
        return self.endpoints.get(listener, (self.host, self.port))


def open_topic_store(directory: Path, cfg: ServerConfig) -> PartitionTopicStore:
    """The embedded partition log, with the server's fsync policy, limits and open-file budget."""
    return PartitionTopicStore.open(
        directory,
        fsync=cfg.fsync,
        open_files=capacity_for_limit(cfg.max_open_segment_files),
        max_partitions_per_topic=cfg.max_partitions_per_topic,
        max_partitions=cfg.max_partitions,
        message_max_bytes=cfg.message_max_bytes,
        segment_bytes=cfg.segment_bytes,
    )


class Server:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.stopped = asyncio.Event()
        self.exit_code = 0
        self._listeners: list[asyncio.Server] = []
        #: listener name -> the port it listens on
        self.ports: dict[str, int] = {}
        #: the versions of the APIs whose order across connections decides a group's state (the membership APIs,
        #: the offset commits), being prepared on the decoding thread from the start of serving
        #: (``connection.prepare_ordered_versions``)
        self.ordered_prepared: concurrent.futures.Future[None] | None = None
        self._scram: ScramStore | None = None
        self._acls: AclStore | None = None
        self._runtime: CoordinatorRuntime | None = None
        self._topics: PartitionTopicStore | None = None
        self._transactions: TransactionRuntime | None = None
        self._cleaner: asyncio.Task[None] | None = None
        self._image_feed: ImageFeed | None = None
        self._events: GroupEvents | None = None
        self._dispatcher: Dispatcher | None = None
        self._connections: set[Connection] = set()
        self._ids = itertools.count(1)
        self._stats: asyncio.Task[None] | None = None
        self._http: HttpServer | None = None
        self._event_hub: EventHub | None = None
        self._history: HistoryFeed | None = None
        self._replays: Replays | None = None
        self._scrape_sources: ScrapeSources | None = None
        self._connections_opened = 0
        self._admission: Admission | None = None
        self._accept_errors: AcceptErrors | None = None
        self._share_sessions = ShareSessions(config.share_max_sessions)
        self._watchdog = StallWatchdog(config.stall_warn_ms) if config.stall_warn_ms > 0 else None
        self._young_gc = None if config.gc_young_threshold is None else YoungCollector(config.gc_young_threshold)
        self._collector_task: asyncio.Task[None] | None = None
        #: the request handling all connections share per turn of the loop (made with the loop, in ``_start``)
        self._turn_budget: TurnBudget | None = None
        #: releases of share members whose connection dropped, running
        self._background: set[asyncio.Task[None]] = set()
        self.port = config.port
        #: the port the HTTP console listens on (None: none)
        self.http_port: int | None = None
        self.metrics_port: int | None = None  # (the same: /metrics is one of the console's paths)

    async def start(self) -> None:
        """Open everything and listen; raises ``StartupError`` after undoing what it opened, and after removing
        the data directory when this start created it (never one that existed, nor one another process holds)."""
        created = _outermost_missing(self.config.data_dir)
        try:
            await self._start()
        except BaseException as exc:
            await self.close()
            if created is not None and not isinstance(exc, DataDirInUseError):
                shutil.rmtree(created, ignore_errors=True)
            raise

    async def _start(self) -> None:
        cfg = self.config
        auth = http_auth(cfg)  # (refuses an exposed console without authentication before anything is opened)
        clog = _open_coordinator_log(cfg)  # (holds the data directory's lock from here)
        group_configs = GroupConfigStore(
            cfg.data_dir / GROUP_CONFIG_FILE, cfg.coordinator, sync=cfg.fsync is not FsyncPolicy.NEVER
        )
        try:
            _guard_startup("cannot read the groups' configurations", group_configs.load)
            self._runtime = CoordinatorRuntime.load(
                clog,
                config=cfg.coordinator,
                ids=Uuid4Ids(),
                on_fatal=self._fatal,
                group_configs=core_group_configs(group_configs),
            )
        except BaseException as exc:
            clog.close()
            if isinstance(exc, StorageError):
                raise StartupError(f"cannot load the coordinator log: {exc}{_repair_hint(cfg, exc)}") from None
            raise
        sync = cfg.fsync is not FsyncPolicy.NEVER
        self._scram = ScramStore(cfg.data_dir / SCRAM_CREDENTIALS_FILE, sync=sync)
        _guard_startup("cannot read the SCRAM credentials", self._scram.load)
        if cfg.authorizer is not None:
            authorizer = Authorizer(cfg.super_users, cfg.allow_everyone_if_no_acl_found)
            acls = AclStore(cfg.data_dir / ACL_FILE, sync=sync, authorizer=authorizer)
            _guard_startup("cannot read the ACLs", acls.load)
            self._acls = acls
        topics_dir = cfg.data_dir / "topics"
        self._topics = _guard_startup(
            "cannot open the partition log", lambda: open_topic_store(topics_dir, cfg), _repair_hint_for(cfg)
        )
        self._admission = Admission(
            cfg.max_connections, cfg.max_connections_per_ip, log_files=self._topics.open_files_max
        )
        self._feed_image()
        self._topics.on_change = self._feed_image
        cleaner = LogCleaner(self._topics, self._topics.configs.policy)
        log_report(cleaner.run_once(wall_ms()))
        # the group coordinator's writer runs from here: completing a transaction left preparing also completes the
        # offsets it sent to groups, and waits for those records to be durable
        self._runtime.start()
        self._transactions = await self._start_transactions(self._topics)
        http_port, http_host = http_address(cfg)
        if cfg.events is not None or http_port is not None:
            events_path = cfg.events
            self._events = _guard_startup(f"cannot open {events_path}", lambda: GroupEvents(events_path))
            self._runtime.add_observer(self._events)
            if http_port is not None:
                if cfg.history_window_ms > 0:
                    self._history = self._open_history()
                    self._events.add_sink(self._history.sink, self._history.sink_run)
                self._event_hub = EventHub()
                hub = self._event_hub
                self._events.add_sink(hub.publish, lambda piece: hub.publish_lines(piece.lines))
            self._events(self._runtime.coordinator, Result(), wall_ms())
        rebalances = RebalanceLog(log_changes=self._events is None)  # the group events log the changes themselves
        self._runtime.add_observer(rebalances)
        rebalances(self._runtime.coordinator, Result(), wall_ms())  # the groups loaded are no news
        request_metrics = RequestMetrics() if http_port is not None else None
        if request_metrics is not None and http_port is not None:  # up before the Kafka port accepts
            self._scrape_sources = ScrapeSources(
                requests=request_metrics,
                runtime=self._runtime,
                rebalances=rebalances,
                coordinator_log=clog,
                topics=self._topics,
                records_at_start=clog.log.next_offset,
                watchdog=self._watchdog,
                young_gc=self._young_gc,
            )
            view = ServerView(
                self._runtime, self._topics, None if self._history is None else self._history.timeline_settled
            )
            self._runtime.add_observer(view.observe)
            view.observe(self._runtime.coordinator, Result(), wall_ms())
            if self._history is not None:
                self._replays = Replays(cfg.data_dir, self._history.settled_segments)
                self._replays.open()
            console = Console(
                view, scrape=self._scrape, events=self._event_hub, auth=auth(self._scram), replays=self._replays
            )
            self._http = HttpServer(console, http_host, http_port, accepts_post=Console.accepts_post)
            try:
                await self._http.start()
            except OSError as exc:
                raise StartupError(f"cannot listen on {http_host}:{http_port}: {exc.strerror or exc}") from None
            self.http_port = self.metrics_port = self._http.port
        listeners = [_security(listener, self._scram) for listener in listeners_of(cfg)]
        loop = asyncio.get_running_loop()
        self._turn_budget = TurnBudget(loop)
        self._accept_errors = AcceptErrors(loop.get_exception_handler())
        loop.set_exception_handler(self._accept_errors)
        endpoints: dict[str, tuple[str, int]] = {}
        for security in listeners:
            listener = security.config
            try:
                server = await loop.create_server(
                    functools.partial(self._new_connection, security),
                    listener.host,
                    listener.port,
                    reuse_address=True,
                    ssl=security.ssl_context,
                    start_serving=False,  # no connection before the dispatcher exists (see below)
                )
            except OSError as exc:
                raise StartupError(
                    f"cannot listen on {listener.host}:{listener.port} (listener {listener.name}): "
                    f"{exc.strerror or exc}"
                ) from None
            self._listeners.append(server)
            port = server.sockets[0].getsockname()[1]
            self.ports[listener.name] = port
            endpoints[listener.name] = (
                listener.advertised_host or _advertised(listener.host),
                listener.advertised_port or port,
            )
        first = listeners[0].config.name
        self.port = self.ports[first]
        broker = ServerBroker(
            share_sessions=self._share_sessions,
            share_groups=cfg.share_groups,
            host=endpoints[first][0],
            port=endpoints[first][1],
            topic_store=self._topics,
            coordinator=self._runtime,
            api_specs=load_specs(),
            auto_create_topics=cfg.auto_create_topics,
            default_partitions=cfg.default_partitions,
            broker_configs=broker_config_entries(cfg),
            transactions=self._transactions,
            group_configs=group_configs,
            endpoints=endpoints,
            scram=self._scram,
            acls=self._acls,
            authorizer=None if self._acls is None else self._acls.authorizer,
            rack=cfg.broker_rack,
        )
        self._dispatcher = Dispatcher(broker, broker.api_specs, request_metrics, cfg.id_limits)
        if self._scrape_sources is not None:
            self._scrape_sources.failures = self._dispatcher.failures
        if self._watchdog is not None:
            self._watchdog.start()
        self._stats = asyncio.get_running_loop().create_task(self._log_stats())
        self._cleaner = asyncio.get_running_loop().create_task(
            cleaner.run_forever(cfg.log_retention_check_interval_ms, wall_ms)
        )
        groups = len(self._runtime.coordinator.groups)
        # Every listener accepts only now that connections have somewhere to go: a connection accepted while a
        # later listener was still being opened would meet no dispatcher, and an event loop whose protocol
        # factory raises closes that listener for good. The first listener opens last, so a client that sees
        # it accept finds all the others accepting too.
        if cfg.switch_interval_s is not None:
            sys.setswitchinterval(cfg.switch_interval_s)
        if cfg.freeze_loaded:
            # What was loaded (groups, topics, the rebalance history) lives as long as the process: out of the
            # cyclic collector's sight, its collections of the young objects every request makes never walk it.
            gc.collect()
            gc.freeze()
        if self._young_gc is not None:
            self._young_gc.install()
            self._collector_task = asyncio.get_running_loop().create_task(self._tend_collector(self._young_gc))
        for server in self._listeners[1:] + self._listeners[:1]:
            await server.start_serving()
        self.ordered_prepared = prepare_ordered_versions(self._dispatcher.versions)
        for security in listeners[1:]:
            listener = security.config
            host, port = endpoints[listener.name]
            log.info(
                "listening listener=%s protocol=%s host=%s port=%d advertised=%s:%d",
                listener.name,
                listener.protocol.value,
                listener.host,
                self.ports[listener.name],
                host,
                port,
            )
        log.info(
            "serving host=%s port=%d advertised=%s:%d data_dir=%s fsync=%s groups_loaded=%d topics=%d partitions=%d "
            "open_segment_files_max=%d apis=%d http=%s metrics=%s listener=%s protocol=%s authorizer=%s "
            "event_loop=%s stall_warn_ms=%s",
            listeners[0].config.host,
            self.port,
            broker.host,
            broker.port,
            cfg.data_dir,
            cfg.fsync.value,
            groups,
            len(self._topics.topics()),
            self._topics.partition_count,
            self._topics.open_files_max,
            len(broker.api_specs),
            "off" if self._http is None else f"{self._http.url}/",
            "off" if self._http is None else f"{self._http.url}/metrics",
            first,
            listeners[0].config.protocol.value,
            "off" if self._acls is None else "on",
            type(asyncio.get_running_loop()).__module__.split(".")[0],  # uvloop or asyncio
            cfg.stall_warn_ms or "off",
        )

    def _open_history(self) -> HistoryFeed:
        """The rebalance history, its rows on disk within the window folded already."""
        cfg = self.config
        feed = _guard_startup(
            "cannot open the rebalance history", lambda: HistoryFeed(cfg.data_dir, cfg.history_window_ms, wall_ms)
        )
        loaded = feed.load()
        log.info(
            "rebalance history window_ms=%d rows_loaded=%d groups=%d",
            cfg.history_window_ms,
            loaded,
            len(feed.timelines.group_ids()),
        )
        feed.start()
        return feed

    async def _start_transactions(self, topics: PartitionTopicStore) -> TransactionRuntime:
        """Load the transaction coordinator and finish what it left preparing, before the port opens."""
        cfg = self.config
        directory = cfg.data_dir / "transactions"
        tlog = _guard_startup(
            "cannot open the transaction log",
            lambda: TransactionLog.open(directory, fsync=cfg.fsync, snapshot_every=cfg.snapshot_every),
            _repair_hint_for(cfg),
        )
        try:
            runtime = TransactionRuntime.load(tlog, topics, config=cfg.transactions, on_fatal=self._fatal)
        except BaseException as exc:
            tlog.close()
            if isinstance(exc, (StorageError, ValueError)):
                raise StartupError(f"cannot load the transaction log: {exc}{_repair_hint(cfg, exc)}") from None
            raise
        groups = self._runtime
        if groups is not None:

            async def complete(producer_id: int, producer_epoch: int, committed: bool) -> None:
                await groups.write(lambda c, key, now: c.complete_transaction(producer_id, committed, now))

            runtime.set_group_completion(complete)
        await runtime.start()
        return runtime

    def _new_connection(self, security: ListenerSecurity) -> Connection:
        """The protocol of a connection just accepted on a listener (``loop.create_server``'s factory)."""
        assert self._dispatcher is not None
        cfg = self.config
        return Connection(
            self._dispatcher,
            next(self._ids),
            max_frame_bytes=cfg.max_frame_bytes,
            max_in_flight=cfg.connection_max_in_flight,
            max_queued_bytes=cfg.connection_max_queued_bytes,
            max_idle_ms=cfg.connections_max_idle_ms,
            admit=self._admit,
            on_close=self._closed,
            new_session=security.new_session,
            stalls=self._watchdog,
            turn_budget=self._turn_budget,
        )

    def _admit(self, connection: Connection) -> bool:
        """Let a connection in, within the connection limits (it knows its peer now)."""
        assert self._admission is not None
        if not self._admission.admit(connection.client_host):
            return False
        self._connections.add(connection)
        self._connections_opened += 1
        return True

    def _closed(self, connection: Connection) -> None:
        if connection.admitted and self._admission is not None:
            self._connections.discard(connection)
            self._admission.release(connection.client_host)
        for group_id, member_id in self._share_sessions.connection_closed(connection.connection_id):
            self._release_share_member(group_id, member_id)

    def _release_share_member(self, group_id: str, member_id: str) -> None:
        """A share consumer's connection dropped with its session: what it held goes back (as in Kafka)."""
        runtime = self._runtime
        if runtime is None:
            return

        async def release() -> None:
            try:
                await release_share_member(runtime, group_id, member_id)
            except Exception as exc:  # the coordinator stopped: the locks lapse instead
                log.debug("releasing share member %s of %s: %s", member_id, group_id, exc)

        task = asyncio.get_running_loop().create_task(release())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _feed_image(self) -> None:
        """Give the coordinator the topics as they are now (at startup and after every topic change); the
        topics that did not change keep their images (``server/image.py``)."""
        if self._runtime is not None and self._topics is not None:
            try:
                if self._image_feed is None:
                    self._image_feed = ImageFeed(self.config.broker_rack)
                self._runtime.update_metadata(self._image_feed.image(self._topics.topics()))
            except Exception:
                log.exception("cannot hand the coordinator the new cluster image")

    async def _scrape(self) -> str:
        sources = self._scrape_sources
        assert sources is not None
        sources.connections_open, sources.connections_opened = len(self._connections), self._connections_opened
        if self._admission is not None:
            sources.connections_refused = dict(self._admission.refused)
        return await scrape(sources)

    def _fatal(self, exc: BaseException) -> None:
        self.exit_code = 1
        self.stopped.set()

    @staticmethod
    async def _tend_collector(collector: YoungCollector) -> None:
        """The young generation counted every ``YOUNG_CHECK_S`` (``YoungCollector.measure``), the heap's size
        read about once a second, and the frozen objects' cycles reclaimed once it has doubled
        (``YoungCollector.check``): between turns of the loop, never inside a request's handling."""
        checked = time.monotonic()
        while True:
            await asyncio.sleep(YOUNG_CHECK_S)
            collector.measure()
            now = time.monotonic()
            if now - checked >= RECLAIM_CHECK_S:
                checked = now
                collector.check()

    async def _log_stats(self) -> None:
        assert self._dispatcher is not None
        while True:
            await asyncio.sleep(self.config.stats_interval_s)
            counts = self._dispatcher.take_counts()
            failures = self._dispatcher.failures.take()
            if failures:
                log.info(
                    "requests not served normally last_%gs %s",
                    self.config.stats_interval_s,
                    " ".join(f"{key}={n}" for key, n in failures.items()),
                )
            if counts:
                line = " ".join(f"{name}={n}" for name, n in sorted(counts.items()))
                interval, connections = self.config.stats_interval_s, len(self._connections)
                total = sum(counts.values())
                log.info(
                    "requests last_%gs total=%d per_s=%.1f connections=%d %s",
                    interval,
                    total,
                    total / interval,
                    connections,
                    line,
                )

    async def close(self) -> None:
        """Stop accepting, drop every connection, make queued records durable, close the logs. Idempotent."""
        if self._event_hub is not None:
            self._event_hub.close()
        if self._http is not None:
            await self._http.close()
            self._http = None
        if self._replays is not None:
            await self._replays.close()
            self._replays = None
        for listener in self._listeners:
            listener.close()
        for task in [self._stats, self._cleaner, self._collector_task]:
            if task is not None:
                task.cancel()
        if self._young_gc is not None:
            self._young_gc.uninstall()
        if self._watchdog is not None:
            await self._watchdog.close()
        handlers = [task for connection in list(self._connections) for task in connection.close()]
        await asyncio.gather(*handlers, return_exceptions=True)
        for listener in self._listeners:
            with contextlib.suppress(Exception):
                await listener.wait_closed()
        self._listeners = []
        if self._transactions is not None:  # (its marker writer completes offsets in the group coordinator)
            await self._transactions.close()
            self._transactions = None
        if self._runtime is not None:
            await self._runtime.close()
            self._runtime = None
        if self._topics is not None:
            self._topics.close()
            self._topics = None
        if self._events is not None:
            self._events.close()
            self._events = None
        if self._history is not None:
            await self._history.close()
            self._history = None
        if self._accept_errors is not None:
            asyncio.get_running_loop().set_exception_handler(self._accept_errors.previous)
            self._accept_errors = None


def http_address(cfg: ServerConfig) -> tuple[int | None, str]:
    """The HTTP console's port (None: no console) and address: ``--http-port``/``--http-host``, else their older
    names ``--metrics-port``/``--metrics-host``."""
    port = cfg.http_port if cfg.http_port is not None else cfg.metrics_port
    return port, cfg.http_host or cfg.metrics_host or LOOPBACK


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def http_auth(cfg: ServerConfig) -> Callable[[ScramStore | None], BasicAuth | None]:
    """How the console authenticates, once the SCRAM credentials are read: HTTP Basic against the SASL users when
    a listener authenticates with SASL (PLAIN's users from the listeners' JAAS configurations, SCRAM's from the
    credential store), else not at all — and then an address that is not loopback is a ``StartupError`` unless
    ``http_insecure`` says to serve it anyway."""
    port, host = http_address(cfg)
    listeners = listeners_of(cfg)
    mechanisms = {m for listener in listeners for m in listener.sasl_mechanisms}
    if not mechanisms:
        if port is not None and not is_loopback(host) and not cfg.http_insecure:
            raise StartupError(
                f"--http-host {host}: no listener authenticates clients (no SASL), so the HTTP console would be open "
                "to anyone who can reach it; serve it on loopback, or pass --http-insecure to serve it anyway"
            )
        return lambda scram: None
    plain: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        for listener in listeners:
            for user, password in listener.plain_users.items():
                plain.setdefault(user, password)
    with_scram = any(m.startswith("SCRAM-") for m in mechanisms)
    return lambda scram: BasicAuth(plain, scram.lookup if with_scram and scram is not None else None)


def _open_coordinator_log(cfg: ServerConfig) -> CoordinatorLog:
    directory = cfg.data_dir / "coordinator"
    try:
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        return CoordinatorLog.open(directory, fsync=cfg.fsync, snapshot_every=cfg.snapshot_every)
    except LogLockedError:
        raise DataDirInUseError(f"data dir {cfg.data_dir} is in use by another regroup process") from None
    except StorageError as exc:
        raise StartupError(f"cannot open the coordinator log in {directory}: {exc}{_repair_hint(cfg, exc)}") from None
    except OSError as exc:
        raise StartupError(f"cannot use data dir {cfg.data_dir}: {exc.strerror or exc}") from None


def _outermost_missing(path: Path) -> Path | None:
    """The outermost directory a start would create for ``path`` (``path`` itself or a missing ancestor of it);
    None when ``path`` exists."""
    missing = None
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            break
        missing = candidate
    return missing


def _guard_startup(what: str, open_: Callable[[], T], hint: Callable[[BaseException], str] | None = None) -> T:
    try:
        return open_()
    except (OSError, StorageError) as exc:
        detail = getattr(exc, "strerror", None) or exc
        filename = getattr(exc, "filename", None)
        if filename:
            detail = f"{filename}: {detail}"
        raise StartupError(f"{what}: {detail}{hint(exc) if hint else ''}") from None


def _repair_hint(cfg: ServerConfig, exc: BaseException) -> str:
    """For damage: the command that reports it and repairs it."""
    if not isinstance(exc, CorruptLogError):
        return ""
    return f" (`regroup repair --data-dir {cfg.data_dir}` shows what is damaged and how to repair it)"


def _repair_hint_for(cfg: ServerConfig) -> Callable[[BaseException], str]:
    return lambda exc: _repair_hint(cfg, exc)


def listeners_of(cfg: ServerConfig) -> tuple[ListenerConfig, ...]:
    """The configured listeners, or the one PLAINTEXT listener of ``--host``/``--port``."""
    if cfg.listeners:
        return cfg.listeners
    listener = default_listener(cfg.host, cfg.port)
    return (dataclasses.replace(listener, advertised_host=cfg.advertised_host, advertised_port=cfg.advertised_port),)


def _security(listener: ListenerConfig, scram: ScramStore | None) -> ListenerSecurity:
    try:
        return ListenerSecurity(listener, None if scram is None else scram.lookup)
    except SecurityConfigError as exc:
        raise StartupError(str(exc)) from None


def _advertised(host: str) -> str:
    """What FindCoordinator tells clients to connect to: the listen address, unless it is a wildcard."""
    return socket.gethostname() if host in ("", "0.0.0.0", "::") else host


async def run(config: ServerConfig) -> int:
    """Serve until SIGTERM/SIGINT (exit 0) or a fatal log failure (exit 1). Raises ``StartupError``."""
    server = Server(config)
    await server.start()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.stopped.set)
    try:
        await server.stopped.wait()
        log.info("shutting down")
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await server.close()
    log.info("stopped")
    return server.exit_code
