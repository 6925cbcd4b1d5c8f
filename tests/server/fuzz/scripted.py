"""Scripted fuzzing: instead of independent frames, each fuzz connection follows a *script* that talks with the
server (a SASL exchange whose next message depends on the last challenge, a TLS handshake) and mutates it at
every step. The SASL (``sasl``) and TLS (``tls``) modes are scripts; this module runs them with the frame
fuzzer's watch (``runner.FuzzRun``: crash, hang, log errors, memory, files) and adds what a script knows
about the exchange: *protocol* findings, e.g. a request answered before authentication, a wrong password
accepted, a valid exchange refused, a failed one left open.

Reproducible by seed: script number ``n`` of a run draws everything from ``random.Random("<mode>:<seed>:<n>")``
(only the server's own randomness, a SCRAM nonce, differs between runs), so ``--script n`` with the same seed
replays it alone. Which scripts a run reaches depends on timing (they run concurrently until the frame budget
is spent); every finding names its scripts (``"scripts"`` in the findings file)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tests.server.conftest import ServerProcess
from tests.server.fuzz.mutate import Mutant, Mutator
from tests.server.fuzz.runner import SENTINEL, SENTINEL_ID, Finding, FuzzRun, Options, ServerGone
from tests.server.fuzz.seeds import CORRELATION_AT, SIZE, TAG_AT, TAG_CLIENT_ID, TAG_DIGITS, Seed
from tests.server.fuzz.watch import LogRecord

#: the longest one script may run (every read has its own, shorter, bound)
SCRIPT_TIMEOUT = 60.0
_PEER = re.compile(r"\b127\.0\.0\.1:(\d+)\b")


class Closed(Exception):
    """The server closed (or reset) the connection."""


class Stalled(Exception):
    """No (complete) answer within the bound."""


class Link:
    """A client connection: writes bytes, reads size-prefixed frames or raw bytes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        sockname = writer.get_extra_info("sockname")
        self.local_port = int(sockname[1]) if isinstance(sockname, tuple) else 0

    @classmethod
    async def open(cls, port: int) -> Link:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as exc:
            raise ServerGone(str(exc)) from exc
        return cls(reader, writer)

    def write(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)

    def write_raw(self, data: bytes) -> None:
        """Bytes on the wire as they are (the same as ``write`` on a plain connection)."""
        self.write(data)

    def write_eof(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            if not self.writer.is_closing() and self.writer.can_write_eof():
                self.writer.write_eof()

    async def drain(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            await self.writer.drain()

    async def read_frame(self, timeout: float) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                (size,) = SIZE.unpack(await self.reader.readexactly(SIZE.size))
                if size < 0 or size > 64 * 2**20:
                    raise Closed(f"answer of size {size}")
                return await self.reader.readexactly(size)
        except TimeoutError:
            raise Stalled from None
        except (ConnectionResetError, BrokenPipeError):  # (it closed with bytes of ours unread)
            raise Closed("reset") from None
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            raise Closed(str(exc) or "end of stream") from None

    async def closes(self, timeout: float) -> bool:
        """Whether the server closes the connection within ``timeout`` (what it sends meanwhile is dropped)."""
        try:
            async with asyncio.timeout(timeout):
                while await self.reader.read(65536):
                    pass
            return True
        except TimeoutError:
            return False
        except (ConnectionError, OSError):
            return True

    def close(self) -> None:
        self.writer.close()


@dataclass
class Expected:
    """A frame sent that the server may answer (``forbidden``: it must not)."""

    correlation_id: int
    forbidden: bool
    how: str


class Script:
    """One fuzz connection's script: ``run`` draws one of ``PLANS`` (a subclass's ``plan_<name>`` methods) and
    follows it. Knows what it sent (``sent``, for the findings file) and which answers it still expects."""

    #: (weight, plan name): ``run`` calls ``plan_<name>``
    PLANS: tuple[tuple[int, str], ...] = ()

    def __init__(self, fuzz: ScriptRun, index: int) -> None:
        self.fuzz = fuzz
        self.index = index
        self.rng = random.Random(f"{fuzz.mode}:{fuzz.options.seed}:{index}")
        self.mutator = Mutator(self.rng, fuzz.seeds, fuzz.versions)
        self.client_id = b"fz-%08x" % index
        self.sent: list[Mutant] = []
        self.expected: collections.deque[Expected] = collections.deque()
        self.correlation = 0
        self.plan = ""
        self.link: Link | None = None
        self.ended = False
        #: the server reset the connection (it closed with bytes unread: what it sent last may be lost)
        self.reset = False
        self.close_reason = ""
        self.stall = fuzz.options.stall_timeout
        self.outcomes = fuzz.report.outcomes

    # ------------------------------------------------------------------------------ running
    async def run(self) -> None:
        weights = [w for w, _ in self.PLANS]
        self.plan = self.rng.choices([p for _, p in self.PLANS], weights)[0]
        self.outcomes[f"plan {self.plan}"] += 1
        try:
            await getattr(self, f"plan_{self.plan.replace('-', '_')}")()
        finally:
            if self.link is not None:
                self.link.close()

    async def connect(self) -> Link:
        self.link = await Link.open(self.fuzz.server.port)
        self.fuzz.by_port[self.link.local_port] = self
        return self.link

    # ------------------------------------------------------------------------------ sending
    def next_correlation(self) -> int:
        self.correlation += 1
        return self.correlation

    def send(
        self,
        frame: bytes,
        api_key: int,
        version: int,
        how: str,
        *,
        answered: bool = True,
        forbidden: bool = False,
        raw: bool = False,
    ) -> int | None:
        """Write ``frame``; ``answered``: the server may answer it. Returns the correlation id its answer will
        carry (the frame's own, mutated or not), None when it is not answered or too short to have one."""
        assert self.link is not None
        if forbidden:
            how += " (must not be answered)"
        self.sent.append(Mutant(frame, api_key, version, f"{self.plan}: {how}"))
        self.fuzz.frames_sent += 1
        if raw:
            self.link.write_raw(frame)
        else:
            self.link.write(frame)
        if not answered or len(frame) < 12:
            return None
        (correlation_id,) = struct.unpack_from(">i", frame, 8)
        self.expected.append(Expected(correlation_id, forbidden, how))
        return int(correlation_id)

    def send_mutant(self, mutant: Mutant, *, forbidden: bool = False) -> int | None:
        correlation_id = self.send(
            mutant.frame, mutant.api_key, mutant.version, mutant.how, answered=not mutant.last, forbidden=forbidden
        )
        if mutant.last:
            if self.link is not None:
                self.link.write_eof()
            self.ended = True
        return correlation_id

    # ------------------------------------------------------------------------------ reading
    async def answer(self, correlation_id: int | None = None, timeout: float | None = None) -> bytes | None:
        """Read answers until the one to ``correlation_id`` (the oldest expected one by default); None when the
        connection closes or stalls first. Answers to frames marked forbidden are protocol findings."""
        assert self.link is not None
        if correlation_id is None:
            if not self.expected or self.ended:
                return None
            correlation_id = self.expected[0].correlation_id
        while True:
            try:
                frame = await self.link.read_frame(self.stall if timeout is None else timeout)
            except Closed as exc:
                self.closed(exc)
                return None
            except Stalled:
                self.outcomes["stalled"] += 1
                return None
            if len(frame) < 4:
                self.protocol("an answer shorter than a correlation id", f"{frame.hex()}")
                return None
            (got,) = struct.unpack_from(">i", frame)
            self._match(got)
            if got == correlation_id:
                return frame

    def _match(self, got: int) -> None:
        expected = self.expected
        position = next((i for i, e in enumerate(expected) if e.correlation_id == got), None)
        if position is None:
            if got != SENTINEL_ID:
                self.outcomes["answered (unknown correlation id)"] += 1
            return
        for _ in range(position):
            expected.popleft()
            self.outcomes["no answer"] += 1
        entry = expected.popleft()
        self.outcomes["answered"] += 1
        if entry.forbidden and all(e.correlation_id != got for e in expected):
            self.protocol("a request that must not be answered was answered", entry.how)

    def closed(self, exc: Closed) -> None:
        self.ended = True
        self.close_reason = str(exc)
        self.reset = self.reset or str(exc) == "reset"
        self.outcomes["reset" if self.reset else "closed"] += 1

    async def raw_reply(self) -> bytes | None:
        """A raw SASL token from the server (after SaslHandshake v0); None when it closes or stalls."""
        assert self.link is not None
        try:
            reply = await self.link.read_frame(self.stall)
        except Closed as exc:
            self.closed(exc)
            return None
        except Stalled:
            self.outcomes["stalled"] += 1
            return None
        self.outcomes["raw answered"] += 1
        return reply

    async def expect_close(self, why: str) -> None:
        """The server must close the connection now (answers still expected are read first)."""
        assert self.link is not None
        while self.expected and not self.ended:
            if await self.answer() is None:
                break
        if self.ended:
            return
        if await self.link.closes(self.stall + 1.0):
            self.outcomes["closed"] += 1
            self.ended = True
        else:
            self.protocol("the connection was left open", why)

    async def sentinel(self) -> bool:
        """ApiVersions v0 after what was sent; read until it is answered. False when the connection ended."""
        assert self.link is not None
        self.link.write(SENTINEL)
        while True:
            frame = await self.answer(SENTINEL_ID)
            if frame is None:
                return False
            if struct.unpack_from(">i", frame)[0] == SENTINEL_ID:
                self.outcomes["no answer"] += len(self.expected)
                self.expected.clear()
                return True

    async def mutated_frames(self, count: int, valid: float = 0.5) -> None:
        """``count`` frames of the frame fuzzer (``Mutator``), a share ``valid`` of them unmutated seeds (so
        that a connection lives long enough to build some state), 1, 4 or 16 at a time, each window closed by a
        sentinel; stops when the server closes the connection."""
        assert self.link is not None
        window = self.rng.choice((1, 4, 16))
        sent = 0
        while sent < count and not self.ended:
            for _ in range(min(window, count - sent)):
                if self.rng.random() < valid:
                    self.send_mutant(self.corpus_frame())
                else:
                    self.send_mutant(self.mutator.next(self.next_correlation(), self.index))
                sent += 1
                if self.ended:
                    break
            if self.ended:
                await self.expect_any()
                return
            if not await self.sentinel():
                return

    def corpus_frame(self) -> Mutant:
        """A valid request of the seed corpus, of an API other than ApiVersions and the SASL ones."""
        seed = self.rng.choice(self.fuzz.seeds_of(None))
        data = bytearray(seed.frame)
        struct.pack_into(">i", data, CORRELATION_AT, self.next_correlation())
        if data[CORRELATION_AT + 4 : CORRELATION_AT + 6] == struct.pack(">h", len(TAG_CLIENT_ID)):
            data[TAG_AT : TAG_AT + TAG_DIGITS] = b"%08x" % self.index
        return Mutant(bytes(data), seed.api_key, seed.version, f"valid {seed.api_key}v{seed.version}")

    async def expect_any(self) -> None:
        """Read whatever the server still answers, until it closes (or stalls)."""
        while not self.ended and await self.answer() is not None:
            pass

    # ------------------------------------------------------------------------------ verdicts
    def protocol(self, signature: str, detail: str) -> None:
        self.fuzz.protocol_finding(self, signature, detail)


class ScriptRun(FuzzRun):
    """Runs scripts on ``options.connections`` concurrent connections until ``options.frames`` frames were
    sent, checking the server after every ``options.batch`` frames (``FuzzRun._check``)."""

    mode = ""
    frames_kept = 64

    def __init__(self, options: Options, server: ServerProcess, make: Callable[[ScriptRun, int], Script]) -> None:
        super().__init__(options, server)
        self.seeds: list[Seed] = self.mutator.seeds
        self.make = make
        self.frames_sent = 0
        self.next_index = 0
        self.active: dict[int, Script] = {}
        self.by_index: dict[int, Script] = {}
        self.by_port: dict[int, Script] = {}
        self.recent: collections.deque[Any] = collections.deque(maxlen=2 * options.connections)
        self.replays = list(options.scripts)
        self._seeds_of: dict[int | None, list[Seed]] = {}

    def seeds_of(self, api_key: int | None) -> list[Seed]:
        """The corpus seeds of ``api_key``; None: of every API but ApiVersions, SaslHandshake and
        SaslAuthenticate."""
        known = self._seeds_of.get(api_key)
        if known is None:
            if api_key is None:
                known = [s for s in self.seeds if s.api_key not in (17, 18, 36)]
            else:
                known = [s for s in self.seeds if s.api_key == api_key]
            self._seeds_of[api_key] = known
        return known

    # ------------------------------------------------------------------------------ batches
    def _batch(self, frames: int) -> list[Any]:
        self.budget = frames
        keep = self.next_index - 8 * self.options.connections
        self.by_index = {i: s for i, s in self.by_index.items() if i > keep}
        self.by_port = {p: s for p, s in self.by_port.items() if s.index > keep}
        return []

    def _frames_done(self) -> int:
        return self.frames_sent

    def _take(self) -> int | None:
        if self.options.scripts:
            return self.replays.pop(0) if self.replays else None
        self.next_index += 1
        return self.next_index

    async def _send(self, batch: list[Any]) -> None:
        """Run scripts until the batch's frames are sent (``batch`` receives the scripts run)."""
        end = self.frames_sent + self.budget

        async def worker() -> None:
            while self.frames_sent < end:
                index = self._take()
                if index is None:
                    self.finished = True  # (the replays are over)
                    return
                script = self.make(self, index)
                batch.append(script)
                await self._run_script(script)

        workers = [asyncio.create_task(worker()) for _ in range(self.options.connections)]
        try:
            await asyncio.gather(*workers)
        except ServerGone:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _run_script(self, script: Script) -> None:
        self.active[script.index] = script
        self.by_index[script.index] = script
        try:
            async with asyncio.timeout(SCRIPT_TIMEOUT):
                await script.run()
        except TimeoutError:
            self.report.outcomes["script timed out"] += 1
        except (ConnectionError, OSError):
            self.report.outcomes["closed"] += 1
        except ServerGone:
            raise
        finally:
            self.active.pop(script.index, None)
            self.recent.append(script)
        if self.server.proc is None or self.server.proc.poll() is not None:
            raise ServerGone("exited")

    async def _replay(self, unit: Any) -> None:
        script = self.make(self, unit.index)
        with contextlib.suppress(ServerGone, TimeoutError, ConnectionError, OSError):
            async with asyncio.timeout(SCRIPT_TIMEOUT):
                await script.run()

    def _suspects(self) -> list[Any]:
        return [*self.recent, *self.active.values()]

    def _restart(self) -> bool:
        restarted = super()._restart()
        self.active.clear()
        return restarted

    # ------------------------------------------------------------------------------ findings
    def _finding(self, kind: str, signature: str, units: list[Any], detail: str = "") -> Finding:
        scripts = list(dict.fromkeys(units))
        frames = [m for s in scripts[:4] for m in s.sent]
        context = {"mode": self.mode, "seed": self.options.seed, "scripts": [s.index for s in scripts]}
        return Finding(kind, signature, frames, detail, context)

    def protocol_finding(self, script: Script, signature: str, detail: str) -> None:
        self.report.protocol += 1
        self._record(self._finding("protocol", f"{self.mode}: {signature}", [script], detail))

    def _error(self, record: LogRecord, batch: list[Any]) -> None:
        script: Script | None = None
        if record.tag is not None:
            script = self.by_index.get(record.tag)
        if script is None:
            for port in _PEER.findall(record.message):
                script = self.by_port.get(int(port)) or script
        if script is None and len(batch) == 1:
            script = batch[0]
        self.report.errors += 1
        detail = "\n".join((record.message, *record.rest))[-3000:]
        finding = self._finding("error", record.signature(), [script] if script else [], detail)
        if script is None and batch:  # (the log line names no connection: one of the batch's scripts did it)
            indexes = [s.index for s in batch]
            finding.context["batch"] = f"{min(indexes)}-{max(indexes)}"
        self._record(finding)


def pick(rng: random.Random, weighted: Iterable[tuple[int, Any]]) -> Any:
    """One of the items, drawn by weight."""
    items = list(weighted)
    return rng.choices([item for _, item in items], [weight for weight, _ in items])[0]
