"""The scenario's network for a real run: a TCP relay between the real members and ``regroup serve`` that
holds every chunk of bytes, in each direction, for the scenario's one-way latency plus a uniform jitter
draw (``network.latency_ms``, ``network.jitter_ms``), as the simulator's links do. Order is kept: a chunk
is never delivered before the one read ahead of it, as on a TCP connection. Without it a real run on one
machine has a link of about 0.1 ms, and a rebalance that costs only round trips (an eager join with no
processing time) would be measured on a network the prediction does not use.

The relay runs its own event loop on a daemon thread of the validating process; the server advertises the
relay's port (``serve --advertised-port``), so every connection a client opens after bootstrap goes
through it too.

``hold_open``: a client's connection ending does not end the relay's connection to the server (a host that
vanished: its connections stay half-open at the server, as the simulator's ``share.crash_disconnects: false``).
"""

from __future__ import annotations

import asyncio
import random
import socket
import threading
from typing import Final

CHUNK_BYTES: Final = 65536


class DelayLink:
    """A relay on ``127.0.0.1:port`` to ``upstream``, delaying each direction by ``latency_ms`` plus a
    uniform draw in ``[0, jitter_ms]`` per chunk (seeded)."""

    def __init__(
        self, upstream_port: int, *, latency_ms: int, jitter_ms: int = 0, seed: int = 0, hold_open: bool = False
    ) -> None:
        self.upstream_port = upstream_port
        self.hold_open = hold_open
        self.latency_s = latency_ms / 1000
        self.jitter_ms = jitter_ms
        self.rng = random.Random(seed)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port: int = self.listener.getsockname()[1]
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="regroup-delay-link", daemon=True)
        self.server: asyncio.base_events.Server | None = None
        self.ready = threading.Event()
        self.writers: set[asyncio.StreamWriter] = set()  # both sides of every open connection

    def start(self) -> DelayLink:
        self.thread.start()
        self.ready.wait(10)
        return self

    def close(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
        self.listener.close()

    def delay(self) -> float:
        jitter = self.rng.randint(0, self.jitter_ms) if self.jitter_ms > 0 else 0
        return self.latency_s + jitter / 1000

    # ------------------------------------------------------------------------------------ event loop
    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._accepted, sock=self.listener))
        self.ready.set()
        try:
            self.loop.run_forever()
        finally:  # every connection closed: each relay task sees its ends and finishes
            self.server.close()
            for writer in self.writers:
                writer.close()
            tasks = asyncio.all_tasks(self.loop)
            if tasks:
                self.loop.run_until_complete(asyncio.wait(tasks, timeout=2))
            for task in tasks:
                task.cancel()
            self.loop.run_until_complete(asyncio.sleep(0))
            self.loop.close()

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        except asyncio.CancelledError:  # (the relay is closing)
            writer.close()
            return
        self.writers |= {writer, up_writer}
        upward = self._pump(reader, up_writer, close=not self.hold_open)
        try:
            await asyncio.gather(upward, self._pump(up_reader, writer), return_exceptions=True)
        except asyncio.CancelledError:  # (the relay is closing)
            pass
        finally:
            self.writers -= {writer, up_writer}
            if self.hold_open:  # (the server's side of a client that went stays open until the relay closes)
                self.writers.add(up_writer)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, close: bool = True) -> None:
        """Copy ``reader`` to ``writer``, each chunk delivered at its due time, in order; end (and close the
        other side, unless not to ``close``) after the last chunk once the reader is at its end."""
        loop = asyncio.get_running_loop()
        last_due = 0.0
        try:
            while True:
                chunk = await reader.read(CHUNK_BYTES)
                # strictly increasing due times keep the timer heap in reading order
                last_due = max(loop.time() + self.delay(), last_due + 1e-6)
                if not chunk:
                    if close:
                        loop.call_at(last_due, _close, writer)
                    return
                loop.call_at(last_due, _write, writer, chunk)
        except (OSError, asyncio.IncompleteReadError):
            if close:
                loop.call_at(max(loop.time(), last_due + 1e-6), _close, writer)


def _write(writer: asyncio.StreamWriter, chunk: bytes) -> None:
    if not writer.is_closing():
        writer.write(chunk)


def _close(writer: asyncio.StreamWriter) -> None:
    if not writer.is_closing():
        writer.close()
