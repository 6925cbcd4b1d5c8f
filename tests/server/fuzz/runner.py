"""The fuzz run: mutated frames (``mutate``) sent to a real ``regroup serve`` over several concurrent
connections, many frames pipelined on each; a connection the server closes is expected (the frames behind
the one it refused are sent again on a new connection). After every batch a healthy client on its own
connection must be answered correctly (ApiVersions, and a Heartbeat for an unknown group → its error code)
within ``health_timeout``.

Findings: the process exited (*crash*), the healthy client got no answer in time (*hang*), the log shows an
``ERROR`` record or a traceback (*error*), resident memory grew past ``rss_limit`` over its starting value
(*memory*), the files and directories in use on the data directory's file system grew by more than
``inode_limit`` (*disk*: topics and partitions are directories, so this is how unbounded creation shows;
the run stops there; the count includes whatever else runs on the machine). A crash or hang is narrowed
down by replaying the frames that were in flight, one at a time, on a fresh server; an error names its frame
through the client id (``seeds.TAG_CLIENT_ID``). Each finding is written as a JSON line (frames in hex) to
the findings file and summed up in one printed line; with ``keep_going`` the server is restarted and the run goes on.

``Options.mode`` ``sasl`` or ``tls`` runs connection scripts instead of independent frames (``scripted``): the
same watch, on a server with a SASL_PLAINTEXT or an SSL listener (``sasl.start_server``, ``tls.start_server``)
whose healthy client authenticates, or talks TLS, first; scripts add *protocol* findings."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import random
import shutil
import ssl
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kio.index import load_response_schema
from kio.serial import entity_reader
from kio.serial.errors import SerialError

from tests.server.conftest import ServerProcess
from tests.server.fuzz.mutate import Mutant, Mutator
from tests.server.fuzz.schema import served_versions
from tests.server.fuzz.seeds import SIZE, corpus
from tests.server.fuzz.watch import LogRecord, LogWatcher, rss_bytes
from tests.server.wire import API_VERSIONS, HEARTBEAT, encode_request

UNKNOWN_MEMBER_ID = 25
SENTINEL_ID = 0x7FFFFFFF
HEALTH_GROUP = "health-nobody"


@dataclass
class Finding:
    kind: str  # crash, hang, error, memory, disk, protocol
    signature: str
    frames: list[Mutant]
    detail: str = ""
    #: what else reproduces it (the seed and connection scripts of a scripted run)
    context: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        apis = sorted({m.claims for m in self.frames})
        return f"FINDING {self.kind}: {self.signature} [{', '.join(apis[:8])}{' ...' if len(apis) > 8 else ''}]"


@dataclass
class Report:
    frames: int = 0
    seconds: float = 0.0
    crashes: int = 0
    hangs: int = 0
    errors: int = 0
    memory: int = 0
    disk: int = 0
    #: wrong answers a scripted run recognises (an exchange the server should have refused, or answered)
    protocol: int = 0
    #: files and directories added on the data directory's file system (peak)
    inodes: int = 0
    #: the slowest answer to the healthy client, in seconds
    slowest_health: float = 0.0
    peak_rss: int = 0
    start_rss: int = 0
    restarts: int = 0
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    #: signature -> (kind, count, api versions seen)
    signatures: dict[str, tuple[str, int, set[str]]] = field(default_factory=dict)

    @property
    def findings(self) -> int:
        return self.crashes + self.hangs + self.errors + self.memory + self.disk + self.protocol

    @property
    def rate(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
        return (
            f"fuzz: {self.frames} frames in {self.seconds:.1f} s ({self.rate:.0f} frames/s); "
            f"crashes {self.crashes}, hangs {self.hangs}, tracebacks/errors {self.errors}, memory {self.memory}, "
            f"disk {self.disk}, protocol {self.protocol}; "
            f"peak RSS {self.peak_rss / 2**20:.0f} MiB (start {self.start_rss / 2**20:.0f} MiB); "
            f"files +{self.inodes}; slowest health answer {self.slowest_health:.2f} s; "
            f"restarts {self.restarts}; outcomes: {outcomes}"
        )


@dataclass
class Options:
    frames: int = 10_000
    seed: int = 1
    connections: int = 8
    window: int = 16
    batch: int = 1000
    health_timeout: float = 5.0
    #: a connection with no answer for this long is abandoned (a parked JoinGroup, a long Fetch)
    stall_timeout: float = 2.0
    rss_limit: int = 512 * 2**20
    inode_limit: int = 200_000
    keep_going: bool = True
    #: stop after this many crashes or hangs (each costs a restart and a replay)
    max_restarts: int = 20
    findings_path: Path | None = None
    #: print a progress line every this many frames (0: never)
    progress_every: int = 0
    server_args: tuple[str, ...] = ("--log-level", "warning", "--fsync", "never")
    echo: Callable[[str], None] = print
    #: ``frames`` (independent mutated frames), ``sasl`` or ``tls`` (connection scripts: ``scripted``)
    mode: str = "frames"
    #: run only these scripts of the seed (a scripted mode's replay), once each
    scripts: tuple[int, ...] = ()


class ServerGone(Exception):
    pass


class FuzzRun:
    #: frames of a finding written to the findings file
    frames_kept = 16

    def __init__(self, options: Options, server: ServerProcess) -> None:
        self.options = options
        self.server = server
        self.report = Report()
        self.versions = served_versions()
        rng = random.Random(options.seed)
        self.mutator = Mutator(rng, corpus(rng), self.versions)
        self.counter = 0
        #: the run ends before its frames are sent (a scripted run's replays are over)
        self.finished = False
        self.by_tag: dict[int, Mutant] = {}
        self.inflight: dict[int, collections.deque[Mutant]] = {}
        #: the frames whose connection was just closed or abandoned (a crash closes them all at once)
        self.recent: collections.deque[Mutant] = collections.deque(maxlen=2 * options.connections * options.window)
        self.log = LogWatcher(server.log_path)
        self.out: TextIO | None = None
        self.seen: set[str] = set()

    # ------------------------------------------------------------------------------ the run
    async def run(self) -> Report:
        opts, report = self.options, self.report
        if opts.findings_path is not None:
            self.out = opts.findings_path.open("w")
        started = time.monotonic()
        report.start_rss = report.peak_rss = self._rss()
        self.start_inodes = _inodes_used(self.server.data_dir)
        shown = 0
        try:
            while report.frames < opts.frames and not self.finished:
                batch = self._batch(min(opts.batch, opts.frames - report.frames))
                await self._send(batch)
                report.frames = self._frames_done()
                if not await self._check(batch):
                    break
                if opts.progress_every and report.frames // opts.progress_every > shown:
                    shown = report.frames // opts.progress_every
                    report.seconds = time.monotonic() - started
                    opts.echo(
                        f"fuzz: {report.frames} frames, {report.rate:.0f}/s, {report.findings} findings, "
                        f"RSS {report.peak_rss / 2**20:.0f} MiB"
                    )
        finally:
            report.seconds = time.monotonic() - started
            if self.out is not None:
                self.out.close()
        return report

    def _batch(self, frames: int) -> list[Any]:
        """The next batch of ``frames`` frames (a scripted run returns a list its ``_send`` fills)."""
        batch = [self._next() for _ in range(frames)]
        self.by_tag = {tag: m for tag, m in self.by_tag.items() if tag > self.counter - 4 * self.options.batch}
        return batch

    def _frames_done(self) -> int:
        return sum(self.report.outcomes.values())  # what the server read (a crash loses the rest)

    def _next(self) -> Mutant:
        self.counter += 1
        mutant = self.mutator.next(self.counter, self.counter)
        self.by_tag[self.counter] = mutant
        return mutant

    async def _send(self, batch: list[Mutant]) -> None:
        queue = collections.deque(batch)
        workers = [asyncio.create_task(self._worker(i, queue)) for i in range(self.options.connections)]
        try:
            await asyncio.gather(*workers)
        except ServerGone:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self, index: int, queue: collections.deque[Mutant]) -> None:
        outcomes = self.report.outcomes
        while queue:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.server.port)
            except OSError as exc:
                raise ServerGone(str(exc)) from exc
            inflight = self.inflight[index] = collections.deque()
            ended = sentinel = False
            try:
                while True:
                    while len(inflight) < self.options.window and queue and not ended:
                        mutant = queue.popleft()
                        writer.write(mutant.frame)
                        inflight.append(mutant)
                        if mutant.last:
                            with contextlib.suppress(OSError):  # already closed: the read below sees it
                                writer.write_eof()
                            ended = True
                    if not queue and inflight and not ended and not sentinel:
                        writer.write(SENTINEL)
                        sentinel = True
                    if not inflight:
                        break
                    try:
                        frame = await asyncio.wait_for(_read_frame(reader), self.options.stall_timeout)
                    except (asyncio.IncompleteReadError, ConnectionError):
                        outcomes["closed" if not inflight[0].last else "closed (framing)"] += 1
                        self.recent.extend(inflight)  # the server may have died on any of them
                        inflight.popleft()
                        queue.extendleft(reversed([m for m in inflight if not m.last]))
                        inflight.clear()
                        break
                    except TimeoutError:
                        if self.server.proc is None or self.server.proc.poll() is not None:
                            raise ServerGone("exited") from None
                        outcomes["stalled"] += 1
                        self.recent.append(inflight.popleft())
                        queue.extendleft(reversed([m for m in inflight if not m.last]))
                        inflight.clear()
                        break
                    (correlation_id,) = struct.unpack_from(">i", frame)
                    if correlation_id == SENTINEL_ID:
                        outcomes["no answer"] += len(inflight)
                        inflight.clear()
                        sentinel = False
                        continue
                    matched = next((i for i, m in enumerate(inflight) if _correlation_id(m) == correlation_id), 0)
                    for _ in range(matched):
                        inflight.popleft()
                        outcomes["no answer"] += 1
                    inflight.popleft()
                    outcomes["answered"] += 1
            finally:
                writer.close()

    # ------------------------------------------------------------------------------ checks
    async def _check(self, batch: list[Any]) -> bool:
        """After a batch: process alive, healthy client served, log clean, memory bounded. False: stop."""
        opts, report = self.options, self.report
        exited = self.server.proc is None or self.server.proc.poll() is not None
        healthy = not exited and await self._healthy()
        if not healthy:
            exited = self._exited(grace=3.0)
        native = ""
        for record in self.log.tail() if exited else self.log.new_records():
            if record.level == "STDERR":
                native = native or record.signature()
            elif record.is_finding:
                self._error(record, batch)
        rss = self._rss()
        report.peak_rss = max(report.peak_rss, rss)
        if healthy and rss - report.start_rss > opts.rss_limit:
            report.memory += 1
            self._record(self._finding("memory", f"RSS {rss / 2**20:.0f} MiB", batch, f"start {report.start_rss}"))
            return self._restart()
        inodes = _inodes_used(self.server.data_dir) - self.start_inodes
        report.inodes = max(report.inodes, inodes)
        if healthy and inodes > opts.inode_limit:
            report.disk += 1
            self._record(self._finding("disk", f"{inodes} more files and directories", batch))
            return False
        if healthy:
            return True
        suspects = self._suspects()
        kind = "crash" if exited else "hang"
        code = self.server.proc.poll() if self.server.proc is not None else None
        if kind == "crash":
            report.crashes += 1
        else:
            report.hangs += 1
        tail = native or self._tail_reason()
        if not self._restart():
            self._record(self._finding(kind, f"exit {code}: {tail}" if kind == "crash" else "no answer", suspects))
            return False
        culprits = await self._isolate(suspects or batch[-opts.window :], kind)
        signature = f"exit {code}: {tail}" if kind == "crash" else "healthy client not answered"
        self._record(self._finding(kind, signature, culprits or suspects, f"{len(suspects)} were in flight"))
        return opts.keep_going and self.report.restarts < opts.max_restarts

    def _suspects(self) -> list[Any]:
        """What may have crashed or hung the server: the frames just closed or abandoned, and those in flight."""
        return [*self.recent, *(m for q in self.inflight.values() for m in q)]

    def _finding(self, kind: str, signature: str, units: list[Any], detail: str = "") -> Finding:
        """A finding about ``units`` (frames here; a scripted run's connection scripts)."""
        return Finding(kind, signature, units, detail)

    async def _health_check(self) -> bool:
        return await _health_check(self.server.port)

    async def _replay(self, unit: Any) -> None:
        await _replay(self.server.port, unit, self.options.stall_timeout)

    async def _healthy(self, timeout: float | None = None) -> bool:
        started = time.monotonic()
        try:
            return await asyncio.wait_for(self._health_check(), timeout or self.options.health_timeout)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, SerialError):  # (SerialError: unreadable)
            return False
        finally:
            self.report.slowest_health = max(self.report.slowest_health, time.monotonic() - started)

    def _error(self, record: LogRecord, batch: list[Any]) -> None:
        tag = record.tag
        frames = [self.by_tag[tag]] if tag is not None and tag in self.by_tag else []
        self.report.errors += 1
        self._record(Finding("error", record.signature(), frames, "\n".join((record.message, *record.rest))[-3000:]))

    async def _isolate(self, suspects: list[Any], kind: str) -> list[Any]:
        """Replay the suspects one by one on the restarted server; the ones after which it dies (or stops
        answering) are the culprits (it is restarted after each)."""
        culprits: list[Any] = []
        for unit in dict.fromkeys(suspects):  # each once, in order
            await self._replay(unit)
            if not self._exited() and await self._healthy(2.0):
                continue
            culprits.append(unit)
            self.log.tail()
            if not self._restart() or len(culprits) >= 3:
                break
        self.log.new_records()  # what the replays logged was seen in the first run
        return culprits

    def _exited(self, grace: float = 0.0) -> bool:
        """Whether the server process is gone, waiting up to ``grace`` seconds (an abort that prints a
        native backtrace first takes a moment)."""
        proc = self.server.proc
        if proc is None:
            return True
        try:
            proc.wait(timeout=grace) if grace else None
        except subprocess.TimeoutExpired:
            return False
        return proc.poll() is not None

    def _restart(self) -> bool:
        if self.report.restarts >= self.options.max_restarts:
            return False
        self.report.restarts += 1
        self.server.restart()
        self.log.tail()
        self.inflight.clear()
        self.recent.clear()
        return True

    def _tail_reason(self) -> str:
        text = self.server.log()[-4000:]
        lines = [line for line in text.splitlines() if line.strip()]
        for line in lines:
            if line.startswith(("memory allocation of", "thread '", "Fatal Python error")):
                return line[:200]
        return lines[-1][:200] if lines else ""

    def _rss(self) -> int:
        proc = self.server.proc
        return (rss_bytes(proc.pid) or 0) if proc is not None else 0

    def _record(self, finding: Finding) -> None:
        kind, count, apis = self.report.signatures.get(finding.signature, (finding.kind, 0, set()))
        apis |= {m.claims for m in finding.frames}
        self.report.signatures[finding.signature] = (kind, count + 1, apis)
        if self.out is not None:
            record = {
                "kind": finding.kind,
                "signature": finding.signature,
                "detail": finding.detail,
                **finding.context,
                "frames": [
                    {"claims": m.claims, "seed": f"{m.api_key}v{m.version}", "how": m.how, "hex": m.frame.hex()}
                    for m in finding.frames[: self.frames_kept]
                ],
            }
            self.out.write(json.dumps(record) + "\n")
            self.out.flush()
        if finding.signature not in self.seen:
            self.seen.add(finding.signature)
            self.options.echo(finding.line())


def _inodes_used(path: Path) -> int:
    """Files and directories in use on the file system holding ``path`` (or its closest existing parent)."""
    while not path.exists():
        path = path.parent
    stat = os.statvfs(path)
    return stat.f_files - stat.f_ffree


# ---------------------------------------------------------------------------------- wire helpers
SENTINEL = encode_request(API_VERSIONS, 0, SENTINEL_ID, "fuzz-sentinel")


def _correlation_id(mutant: Mutant) -> int | None:
    if len(mutant.frame) < 12:
        return None
    return int(struct.unpack_from(">i", mutant.frame, 8)[0])


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = SIZE.unpack(await reader.readexactly(4))
    return await reader.readexactly(size)


async def _health_check(port: int, tls: ssl.SSLContext | None = None) -> bool:
    """ApiVersions v2 answered with no error, Heartbeat v4 for an unknown group with UNKNOWN_MEMBER_ID (over
    TLS with ``tls``, for the server name ``localhost``)."""
    hostname = "localhost" if tls is not None else None
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls, server_hostname=hostname)
    try:
        writer.write(encode_request(API_VERSIONS, 2, 1, "fuzz-health"))
        writer.write(
            encode_request(HEARTBEAT, 4, 2, "fuzz-health", group_id=HEALTH_GROUP, generation_id=1, member_id="m")
        )
        versions = _decode(API_VERSIONS, 2, 1, await _read_frame(reader))
        heartbeat = _decode(HEARTBEAT, 4, 2, await _read_frame(reader))
        return bool(versions.error_code == 0 and heartbeat.error_code == UNKNOWN_MEMBER_ID)
    finally:
        writer.close()


def _decode(api_key: int, version: int, correlation_id: int, frame: bytes) -> Any:
    response_cls = load_response_schema(api_key, version)
    header, used = entity_reader(response_cls.__header_schema__)(frame, 0)
    if header.correlation_id != correlation_id:
        raise OSError(f"correlation id {header.correlation_id}, expected {correlation_id}")
    body, _ = entity_reader(response_cls)(frame, used)
    return body


async def _replay(port: int, mutant: Mutant, timeout: float) -> None:
    """Send one frame on a fresh connection (then a sentinel, unless its framing ends the stream) and wait
    until the sentinel is answered or the server closes the connection."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    try:
        writer.write(mutant.frame)
        if mutant.last:
            with contextlib.suppress(OSError):
                writer.write_eof()
        else:
            writer.write(SENTINEL)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            frame = await asyncio.wait_for(_read_frame(reader), left)
            if struct.unpack_from(">i", frame)[0] == SENTINEL_ID:
                return
    except (TimeoutError, OSError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()


# ---------------------------------------------------------------------------------- entry point
def fuzz(options: Options, work_dir: Path | None = None) -> Report:
    """Start a server in ``work_dir`` (a temporary directory by default), run, stop it."""
    own = work_dir is None
    base = Path(tempfile.mkdtemp(prefix="regroup-fuzz-")) if work_dir is None else work_dir
    base.mkdir(parents=True, exist_ok=True)
    make: Callable[[Options, ServerProcess], FuzzRun] = FuzzRun
    if options.mode == "frames":
        server = ServerProcess(base / "data", base / "server.log", list(options.server_args))
        server.start()
    else:  # (the scripted modes import this module)
        if options.mode == "sasl":
            from tests.server.fuzz import sasl as scripts
        elif options.mode == "tls":
            from tests.server.fuzz import tls as scripts  # type: ignore[no-redef]
        else:
            raise ValueError(f"unknown fuzz mode {options.mode!r}")
        server = scripts.start_server(base, options)
        make = scripts.Run
    asyncio_log = logging.getLogger("asyncio")
    level = asyncio_log.level
    asyncio_log.setLevel(logging.ERROR)  # not a warning per write to a connection the server closed
    try:
        return asyncio.run(make(options, server).run())
    finally:
        asyncio_log.setLevel(level)
        server.kill()
        if own:
            shutil.rmtree(base, ignore_errors=True)


def describe(report: Report) -> Iterable[str]:
    """The report's closing lines: one per distinct finding, then the summary."""
    for signature, (kind, count, apis) in sorted(report.signatures.items(), key=lambda item: -item[1][1]):
        listed = ", ".join(sorted(apis, key=_api_order))
        yield f"  {kind} x{count}: {signature} [{listed}]"
    yield report.summary()


def _api_order(claim: str) -> tuple[int, ...]:
    key, _, version = claim.partition("v")
    try:
        return (int(key), int(version))
    except ValueError:
        return (1 << 16,)
