"""A scenario played for real, for ``regroup lab validate``: ``regroup serve --events`` started here, one
confluent-kafka process per member (``lab.real_member``) started, closed (SIGTERM: a clean close) or killed
(SIGKILL: a crash) at the scenario's times, and the run's timeline built in the simulator's event schema
from the server's events (group states and assignments) and the members' callbacks (processing ownership),
so the simulator's summary measures both the same way.

Time 0 of the scenario is a wall-clock instant a little after the server is up; every member process is
started ahead of its join and subscribes exactly then. The server runs with ``--fsync never`` (a commit
costs a round trip, as in the simulator), the scenario's initial rebalance delay and, for KIP-848 groups,
its heartbeat interval, session timeout and server assignors.

The members reach the server through ``lab.link``'s relay, which holds every chunk for the scenario's
one-way latency and jitter (``network``), so round trips cost what they cost in the simulator; the server
advertises the relay's port.

Share members (KIP-932) are ``ShareConsumer`` processes (``lab.real_share_member``) in a share group that
starts at the log start; the scenario's workload is produced into the topics (``lab.share_workload``: the
backlog before time 0, then the production schedule), the coordinator's share settings become ``serve``
flags, the relay keeps a killed member's connections open at the server when ``share.crash_disconnects`` is
false, and the timeline is rebuilt from the members' output (``lab.real_share``).

Only member actions are played (``join``, ``leave``, ``crash``, ``restart``, ``bounce``); scenarios with
network faults, a lossy or duplicating link, partition growth or protocol switches are refused
(``RealRunError``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from regroup.client.app import AppModel
from regroup.client.config import rebalance_protocol
from regroup.lab import real_share
from regroup.lab.link import DelayLink
from regroup.lab.share_workload import ShareWorkload
from regroup.model.eventlog import FIELDS
from regroup.sim.scenario import MemberSpec, Scenario

PLAYED: Final = ("join", "leave", "crash", "restart", "bounce")
#: librdkafka's classic assignors (it has no eager "sticky")
LIBRDKAFKA_ASSIGNORS: Final = ("range", "roundrobin", "cooperative-sticky")
#: a member process is started this long before it joins (Python and librdkafka start-up)
LEAD_S: Final = 3.0
#: the server's coordinator settings a scenario may set, and the ``serve`` flag of each
SERVE_FLAGS: Final = {
    "group_initial_rebalance_delay_ms": "--initial-rebalance-delay-ms",
    "consumer_group_heartbeat_interval_ms": "--consumer-heartbeat-interval-ms",
    "consumer_group_session_timeout_ms": "--consumer-session-timeout-ms",
    "consumer_group_assignors": "--consumer-assignors",
    "consumer_group_assignment_interval_ms": "--consumer-assignment-interval-ms",
    **real_share.SHARE_SERVE_FLAGS,
}


class RealRunError(Exception):
    """A scenario the real run cannot play, or a run that failed; one line."""


def style(member: MemberSpec) -> str:
    """``eager``, ``cooperative``, ``consumer`` or ``share``: the protocol a member's real client speaks."""
    if member.protocol in ("consumer", "share"):
        return member.protocol
    return "cooperative" if rebalance_protocol(member.strategies).name == "COOPERATIVE" else "eager"


def check(scenario: Scenario) -> str:
    """The scenario's one protocol style, or ``RealRunError`` for what a real run cannot play."""
    for i, event in enumerate(scenario.events):
        if event.action not in PLAYED:
            raise RealRunError(f"events[{i}]: a real run plays only {', '.join(PLAYED)} (not {event.action!r})")
        if event.protocol is not None:
            raise RealRunError(f"events[{i}].protocol: a real run does not switch protocols")
    for key in ("loss", "duplicate"):
        if getattr(scenario.network, key) > 0:
            raise RealRunError(f"network.{key}: a real run's TCP link neither loses nor duplicates messages")
    styles = {style(m) for m in scenario.members}
    if len(styles) != 1:
        raise RealRunError(
            f"members: a real run needs one protocol for every member (found {', '.join(sorted(styles))})"
        )
    for key in scenario.coordinator:
        if key not in SERVE_FLAGS:
            raise RealRunError(f"coordinator.{key}: `regroup serve` has no flag for it")
    for member in scenario.members:
        if style(member) not in ("consumer", "share") and strategy(member) is None:
            raise RealRunError(
                f"members {member.name}: librdkafka has none of the strategies {', '.join(member.strategies)}"
            )
    (only,) = styles
    why = real_share.refusal(scenario) if only == "share" else None
    if why is not None:
        raise RealRunError(why)
    return only


def strategy(member: MemberSpec) -> str | None:
    """The ``partition.assignment.strategy`` librdkafka gets: the member's first strategy librdkafka has
    (the group votes for a member's first one), of the same rebalance protocol."""
    wanted = style(member)
    for name in member.strategies:
        if name in LIBRDKAFKA_ASSIGNORS and (name == "cooperative-sticky") == (wanted == "cooperative"):
            return name
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Process:
    member: str
    incarnation: int
    out: Path
    start_s: float  # scenario time of its start
    proc: subprocess.Popen[bytes] = field(init=False)
    ended_at: float | None = None  # wall clock
    how: str = ""  # "leave" / "crash" once ended


@dataclass
class RealRun:
    """One real run: its timeline (events in the simulator's schema, ``t`` in scenario milliseconds) and
    what happened on the way (notes: member errors, processes that would not stop)."""

    events: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


class Player:
    def __init__(self, scenario: Scenario, workdir: Path, seed: int) -> None:
        self.scenario = scenario
        self.workdir = workdir
        self.seed = seed
        self.style = check(scenario)
        self.port = free_port()
        self.server: subprocess.Popen[bytes] | None = None
        self.link: DelayLink | None = None
        self.link_port = self.port
        self.processes: list[Process] = []
        self.running: dict[str, Process] = {}
        self.incarnations: dict[str, int] = {}
        self.t0 = 0.0
        self.notes: list[str] = []
        self.workload: ShareWorkload | None = None
        self.client_log = client_logger(workdir)

    # ------------------------------------------------------------------------------------------ server
    def start_server(self) -> None:
        network = self.scenario.network
        hold_open = self.style == "share" and not self.scenario.share.crash_disconnects
        if network.latency_ms > 0 or network.jitter_ms > 0 or hold_open:
            self.link = DelayLink(
                self.port, latency_ms=network.latency_ms, jitter_ms=network.jitter_ms, seed=self.seed,
                hold_open=hold_open,
            ).start()  # fmt: skip
            self.link_port = self.link.port
        args = [
            sys.executable,
            "-m",
            "regroup",
            "serve",
            "--port",
            str(self.port),
            "--advertised-port",
            str(self.link_port),
            "--data-dir",
            str(self.workdir / "data"),
            "--events",
            str(self.workdir / "server-events.jsonl"),
            "--fsync",
            "never",
            "--log-level",
            "warning",
            "--initial-rebalance-delay-ms",
            "0",
        ]
        for key, value in self.scenario.coordinator.items():
            args += [SERVE_FLAGS[key], ",".join(value) if isinstance(value, tuple | list) else str(value)]
        log = (self.workdir / "server.log").open("wb")
        self.server = subprocess.Popen(args, stdout=log, stderr=log, env=_env())
        deadline = time.monotonic() + 30
        while True:
            if self.server.poll() is not None:
                raise RealRunError(f"regroup serve exited at start-up (see {self.workdir / 'server.log'})")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RealRunError("regroup serve did not start listening within 30 s") from None
                time.sleep(0.05)
        self.create_topics()
        if self.style == "share":
            bootstrap = f"127.0.0.1:{self.link_port}"
            real_share.prepare_group(bootstrap, self.scenario.share_group_id, self.client_log)
            scenario = self.scenario
            self.workload = ShareWorkload(
                bootstrap, scenario.share, scenario.topics, scenario.duration_ms, logger=self.client_log
            )
            self.workload.backlog()

    def create_topics(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        config: dict[str, Any] = {"bootstrap.servers": f"127.0.0.1:{self.link_port}", "logger": self.client_log}
        admin = AdminClient(config)
        futures = admin.create_topics(
            [
                NewTopic(topic, num_partitions=count, replication_factor=1)
                for topic, count in self.scenario.topics.items()
            ]
        )
        for topic, future in futures.items():
            try:
                future.result(timeout=30)
            except Exception as exc:
                raise RealRunError(f"cannot create topic {topic}: {exc}") from None

    # ----------------------------------------------------------------------------------------- members
    def spawn(self, name: str, start_s: float) -> Process:
        member = self.scenario.member(name)
        incarnation = self.incarnations.get(name, 0) + 1
        self.incarnations[name] = incarnation
        out = self.workdir / f"member-{name}-{incarnation}.jsonl"
        if self.style == "share":
            config = real_share.member_config(
                self.scenario, member, f"127.0.0.1:{self.link_port}", f"{self.seed}/{name}/{incarnation}",
                self.workdir / f"go-{name}-{incarnation}", out,
            )  # fmt: skip
            return self.start_process("regroup.lab.real_share_member", config, Process(name, incarnation, out, start_s))
        app: AppModel = member.app
        config = {
            "bootstrap": f"127.0.0.1:{self.link_port}",
            "group": self.scenario.group_id,
            "client_id": name,
            "topics": list(member.topics),
            "style": self.style,
            "strategy": strategy(member),
            "assignor": member.assignor,
            "group_instance_id": member.group_instance_id,
            "session_timeout_ms": member.session_timeout_ms,
            "heartbeat_interval_ms": member.heartbeat_interval_ms,
            "max_poll_interval_ms": member.rebalance_timeout_ms,
            "app": {
                "max_poll_records": app.max_poll_records,
                "processing": list(app.processing),
                "commit_on_revoke": app.commit_on_revoke,
                "revoke_ms": app.revoke_ms,
                "assign_ms": app.assign_ms,
                "client": "librdkafka",
                "heartbeat_phase": app.heartbeat_phase,
            },
            "seed": f"{self.seed}/{name}/{incarnation}",
            "go_file": str(self.workdir / f"go-{name}-{incarnation}"),
            "out": str(out),
        }
        return self.start_process("regroup.lab.real_member", config, Process(name, incarnation, out, start_s))

    def start_process(self, module: str, config: dict[str, Any], process: Process) -> Process:
        """Start ``process``'s member process: ``python -m module CONFIG.json``."""
        stem = self.workdir / f"member-{process.member}-{process.incarnation}"
        path = stem.with_suffix(".json")
        path.write_text(json.dumps(config), encoding="utf-8")
        log = stem.with_suffix(".log").open("wb")
        process.proc = subprocess.Popen([sys.executable, "-m", module, str(path)], stdout=log, stderr=log, env=_env())
        self.processes.append(process)
        return process

    def end(self, process: Process, how: str) -> None:
        process.how = how
        process.ended_at = time.time()
        with contextlib.suppress(ProcessLookupError):
            process.proc.send_signal(signal.SIGKILL if how == "crash" else signal.SIGTERM)

    # -------------------------------------------------------------------------------------------- play
    def plan(self) -> list[tuple[float, str, str, bool]]:
        """The scenario's member actions in order, as (seconds, action, member, effective): a start of a
        running member or an end of a stopped one is ignored, as the simulator ignores it."""
        running: set[str] = set()
        out: list[tuple[float, str, str, bool]] = []
        for event in sorted(self.scenario.events, key=lambda e: e.at_ms):
            name = event.member or ""
            action = event.action
            if action in ("join", "restart"):
                effective = name not in running
                running.add(name)
            elif action == "bounce":
                effective = True
                running.add(name)
            else:
                effective = name in running
                running.discard(name)
            out.append((event.at_ms / 1000, action, name, effective))
        return out

    def play(self) -> RealRun:
        started = time.monotonic()
        try:
            self.start_server()
            plan = self.plan()
            starts = {
                i: self.spawn(name, at)
                for i, (at, action, name, effective) in enumerate(plan)
                if effective and action in ("join", "restart", "bounce")
            }
            self.wait_ready(list(starts.values()))
            self.t0 = time.time() + 0.2
            if self.workload is not None:
                self.workload.start(self.t0)
            for i, (at, action, name, effective) in enumerate(plan):
                if not effective:
                    self.notes.append(f"{at * 1000:.0f} ms: {action} {name}: ignored")
                    continue
                self.sleep_until(self.t0 + at)
                current = self.running.pop(name, None)
                if action in ("leave", "crash", "bounce") and current is not None:
                    self.end(current, "crash" if action == "crash" else "leave")
                    if action == "bounce":  # the new process starts once the old one has closed
                        self.wait_closed(current)
                if i in starts:
                    self.release(starts[i])
                    self.running[name] = starts[i]
            self.sleep_until(self.t0 + self.scenario.duration_ms / 1000)
            for process in list(self.running.values()):
                self.end(process, "leave")
            self.wait_all()
            self.stop_workload()
            return RealRun(self.timeline(), self.notes, time.monotonic() - started)
        finally:
            self.shutdown()

    def release(self, process: Process) -> None:
        """Let a ready process subscribe now."""
        (self.workdir / f"go-{process.member}-{process.incarnation}").write_text("", encoding="utf-8")

    def wait_closed(self, process: Process) -> None:
        """Until the process has closed its consumer (its leave is sent), or exited."""
        deadline = time.monotonic() + 20
        while process.proc.poll() is None:
            if process.out.exists() and '"closed"' in process.out.read_text(encoding="utf-8"):
                return
            if time.monotonic() > deadline:
                self.notes.append(f"member {process.member} did not close within 20 s: killed")
                process.proc.kill()
                process.proc.wait()
                return
            time.sleep(0.002)

    def wait_ready(self, processes: list[Process]) -> None:
        """Until every member process has built its consumer (and waits for time 0)."""
        deadline = time.monotonic() + 120
        for process in processes:
            while not (process.out.exists() and process.out.stat().st_size > 0):
                if process.proc.poll() is not None:
                    raise RealRunError(f"member {process.member} exited at start-up (see its log in {self.workdir})")
                if time.monotonic() > deadline:
                    raise RealRunError("member processes did not start within 120 s")
                time.sleep(0.05)

    def sleep_until(self, wall: float) -> None:
        while True:
            left = wall - time.time()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    def wait_all(self) -> None:
        deadline = time.monotonic() + 20
        for process in self.processes:
            left = max(deadline - time.monotonic(), 0.1)
            try:
                process.proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                self.notes.append(f"member {process.member} did not close within 20 s: killed")
                process.proc.kill()
                process.proc.wait()

    def stop_workload(self) -> None:
        workload = self.workload
        if workload is not None:
            workload.stop()
            if workload.lateness_ms > 100:
                self.notes.append(f"the producer fell up to {workload.lateness_ms:.0f} ms behind the schedule")
            if workload.failed:
                self.notes.append(f"{len(workload.failed)} records not produced: {workload.failed[0]}")

    def shutdown(self) -> None:
        if self.workload is not None:
            self.workload.stopping.set()
        for process in self.processes:
            if process.proc.poll() is None:
                process.proc.kill()
                process.proc.wait()
        if self.server is not None and self.server.poll() is None:
            self.server.kill()
            self.server.wait()
        if self.link is not None:
            self.link.close()
        for handler in self.client_log.handlers:
            handler.close()

    # ---------------------------------------------------------------------------------------- timeline
    def ms(self, wall_ms: float) -> int:
        return round(wall_ms - self.t0 * 1000)

    def timeline(self) -> list[dict[str, Any]]:
        """The run in the simulator's schema: the server's group states and assignments of the group, the
        members' starts, callbacks, crashes and ends; cut at the scenario's duration."""
        rows: list[dict[str, Any]] = [_row(0, "sim_start", value=self.seed, detail=f"{self.scenario.name} (real run)")]
        for topic, count in sorted(self.scenario.topics.items()):
            rows.append(_row(0, "topic", topic=topic, value=count))
        if self.style == "share":
            return self.finish(rows + self.share_rows())
        states = self.server_rows()
        rows += states
        generations = [(r["t"], r["generation"]) for r in states if r["type"] == "group_state"]
        for process in self.processes:
            rows += self.member_rows(process, generations)
        return self.finish(rows)

    def finish(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows in time order, cut at the scenario's duration, numbered."""
        rows.sort(key=lambda r: (r["t"], _ORDER.get(r["type"], 5)))
        duration = self.scenario.duration_ms
        cut = [r for r in rows if r["t"] <= duration]
        cut.append(_row(duration, "sim_end", value=0))
        for seq, row in enumerate(cut):
            row["seq"] = seq
        return cut

    def share_rows(self) -> list[dict[str, Any]]:
        logs = []
        for p in self.processes:
            crashed = self.ms(p.ended_at * 1000) if p.how == "crash" and p.ended_at is not None else None
            logs.append(real_share.process_log(self.scenario.member(p.member), p.incarnation, p.out, crashed, self.ms))
        assert self.workload is not None
        ends = self.workload.ends(self.scenario.duration_ms)
        return real_share.timeline_rows(logs, self.scenario, ends, self.notes)

    def server_rows(self) -> list[dict[str, Any]]:
        path = self.workdir / "server-events.jsonl"
        if not path.exists():
            return []
        where = f"group={self.scenario.group_id}"
        out: list[dict[str, Any]] = []
        last_group_state = False
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            detail = event.get("detail") or ""
            kind = event["type"]
            if kind == "group_state":
                last_group_state = where in detail.split()
                if last_group_state:
                    out.append({**event, "t": self.ms(event["t"])})
            elif kind == "group_assignment" and (where in detail.split() or (not detail and last_group_state)):
                out.append({**event, "t": self.ms(event["t"])})
        return out

    def member_rows(self, process: Process, generations: list[tuple[int, int]]) -> list[dict[str, Any]]:
        name = process.member
        rows: list[dict[str, Any]] = []
        member = self.scenario.member(name)
        owned: set[tuple[str, int]] = set()
        lines = process.out.read_text(encoding="utf-8").splitlines() if process.out.exists() else []
        for line in lines:
            record = json.loads(line)
            t = self.ms(record["t"])
            kind = record["kind"]
            pairs = [tuple(p) for p in record["partitions"]]
            if kind == "subscribed":
                rows.append(
                    _row(
                        t,
                        "subscription",
                        member=name,
                        state=self.style,
                        detail=",".join(member.topics),
                        value=process.incarnation,
                    )
                )
                rows.append(_row(t, "member_state", member=name, state="Stable"))
            elif kind in ("assigned", "revoked", "lost"):
                generation = _generation_at(generations, t)
                rows.append(_row(t, "callback", member=name, generation=generation, state=kind, value=len(pairs)))
                for topic, partition in pairs:
                    rows.append(_row(t, kind, member=name, generation=generation, topic=topic, partition=partition))
                if kind == "assigned":
                    owned |= set(pairs)
                else:
                    owned -= set(pairs)
            elif kind == "closed":
                rows.append(_row(t, "member_state", member=name, state="Left"))
            elif kind == "error":
                self.notes.append(f"{name}: {record.get('detail')}")
        if process.how == "crash" and process.ended_at is not None:
            t = self.ms(process.ended_at * 1000)
            for topic, partition in sorted(owned):
                rows.append(_row(t, "stopped", member=name, topic=topic, partition=partition))
            rows.append(_row(t, "member_state", member=name, state="Crashed"))
        return rows


#: the order of rows at the same time: starts first, then states, then ownership changes
_ORDER: Final = {"sim_start": -1, "topic": 0, "subscription": 1, "group_state": 2, "group_assignment": 3, "callback": 4}


def _generation_at(generations: list[tuple[int, int]], t: int) -> int | None:
    """The group's generation (KIP-848: epoch) last logged at or before ``t``."""
    found: int | None = None
    for at, generation in generations:
        if at > t:
            break
        found = generation
    return found


def _row(t: int, kind: str, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(FIELDS)
    row.update(t=t, type=kind, **fields)
    return row


def client_logger(workdir: Path) -> logging.Logger:
    """Where librdkafka's log lines of this process's own clients (the admin client, the share workload's producer)
    go: ``workdir/clients.log``, never the command's output (the member processes and the server log to their own
    files)."""
    logger = logging.getLogger(f"regroup.lab.clients.{workdir}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    for handler in list(logger.handlers):  # (a workdir played again)
        logger.removeHandler(handler)
        handler.close()
    handler = logging.FileHandler(workdir / "clients.log", delay=True, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    return logger


def _env() -> dict[str, str]:
    """The environment of the server and member processes: this interpreter's ``regroup`` first."""
    import regroup

    src = str(Path(regroup.__file__).resolve().parents[1])
    path = [src, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def play(scenario: Scenario, seed: int = 0, workdir: Path | None = None) -> RealRun:
    """Play ``scenario`` for real once (in ``workdir``, or a temporary directory removed afterwards)."""
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        return Player(scenario, workdir, seed).play()
    with tempfile.TemporaryDirectory(prefix="regroup-validate-") as tmp:
        return Player(scenario, Path(tmp), seed).play()
