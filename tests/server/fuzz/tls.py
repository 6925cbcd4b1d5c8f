"""The fuzzer's TLS mode (``python -m tests.server.fuzz --tls``): a server with one SSL listener (a test
authority's certificate, client certificates requested and mapped by an ``ssl.principal.mapping.rules`` rule
that only some subjects match) and one script per connection (``TlsScript``):

* **garbage**: random bytes, or bytes that start like a TLS record (any content type and version, lying
  lengths), in one or a few writes;
* **hello**: a real ClientHello (made by Python's ``ssl`` with varied versions, cipher suites, ALPN and server
  names) truncated, bit-flipped, with lying record or handshake lengths, re-fragmented into several records
  (valid), written a few bytes at a time, sent twice, behind a ChangeCipherSpec, an alert or an SSLv2-style
  header, followed by garbage;
* **abort**: a handshake that goes as far as the server's first flight, then the client's next flight
  truncated, garbled, replaced by an alert or garbage, sent twice, or the connection closed;
* **frames**: a complete TLS handshake (TLS 1.2 or 1.3; no client certificate, a trusted one whose subject the
  rule maps, a trusted one it does not map, an untrusted one) and then the frame fuzzer's mutated frames
  (``Mutator``) through it; sometimes it ends on a forged or truncated record, a close_notify followed by
  plaintext, or a Kafka frame in the clear inside the TLS stream;
* **plaintext**: Kafka requests in the clear on the TLS port.

The client side runs on ``ssl.MemoryBIO`` so that a script can write any byte it likes between the real
records. *Protocol* findings: a handshake of a valid client refused; a request answered on a connection whose
client certificate is untrusted or maps to no principal."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from dataclasses import dataclass
from pathlib import Path

from cryptography.x509.oid import NameOID

from tests.server.certs import Authority
from tests.server.conftest import ServerProcess
from tests.server.fuzz.mutate import Mutant
from tests.server.fuzz.runner import Options, _health_check
from tests.server.fuzz.scripted import Closed, Link, Script, ScriptRun, Stalled, pick
from tests.server.fuzz.seeds import SIZE
from tests.server.wire import API_VERSIONS, encode_request

#: how long a script waits for the server's reaction to bytes that are not a valid TLS stream
LINGER = 0.4
HANDSHAKE, CHANGE_CIPHER_SPEC, ALERT, APPLICATION_DATA = 22, 20, 21, 23


@dataclass(frozen=True)
class Certificates:
    authority: Path
    #: client certificate and key files: a subject the mapping rule maps, one it does not, one of another CA
    mapped: tuple[Path, Path]
    unmapped: tuple[Path, Path]
    untrusted: tuple[Path, Path]


class TlsServer(ServerProcess):
    certificates: Certificates


def start_server(base: Path, options: Options) -> TlsServer:
    """``regroup serve`` with an SSL listener (client certificates requested) on certificates made here."""
    authority = Authority(base / "ca")
    issued = authority.server()
    keystore = base / "keystore.pem"
    keystore.write_text(issued.key_pem + issued.cert_pem)
    mapped = authority.client("alice")
    unmapped = authority.issue(
        "client-unmapped", [(NameOID.ORGANIZATION_NAME, "regroup"), (NameOID.COMMON_NAME, "Not Mapped 9")]
    )
    untrusted = Authority(base / "other-ca", "another CA").client("mallory")
    server = TlsServer(base / "data", base / "server.log", [])
    server.certificates = Certificates(
        authority.cert, (mapped.cert, mapped.key), (unmapped.cert, unmapped.key), (untrusted.cert, untrusted.key)
    )
    config = base / "server.properties"
    config.write_text(
        f"listeners=SSL://127.0.0.1:{server.port}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={authority.cert}\n"
        "ssl.client.auth=requested\n"
        "ssl.principal.mapping.rules=RULE:^CN=([a-z]+),.*$/$1/L\n"
    )
    server.extra_args = ["--config", str(config), *options.server_args]
    server.start()
    return server


def client_contexts(certificates: Certificates) -> dict[str, ssl.SSLContext]:
    """Verifying client contexts: TLS 1.3 (default), TLS 1.2 only, and with each client certificate."""
    contexts = {}
    for name in ("plain", "tls12", "mapped", "unmapped", "untrusted"):
        context = ssl.create_default_context(cafile=str(certificates.authority))
        if name == "tls12":
            context.maximum_version = ssl.TLSVersion.TLSv1_2
        if name in ("mapped", "unmapped", "untrusted"):
            context.load_cert_chain(*getattr(certificates, name))
        contexts[name] = context
    return contexts


def hello_contexts() -> list[ssl.SSLContext]:
    """Contexts that only make ClientHellos: TLS 1.2 and 1.3, various suites and ALPN lists."""
    contexts = []
    for maximum in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        for ciphers, alpn in ((None, None), ("ECDHE+AESGCM", ["kafka"]), ("ECDHE+CHACHA20:AES256-SHA", ["h2"] * 40)):
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            context.maximum_version = maximum
            if ciphers:
                with contextlib.suppress(ssl.SSLError):
                    context.set_ciphers(ciphers)
            if alpn:
                context.set_alpn_protocols(alpn)
            contexts.append(context)
    return contexts


def record(content_type: int, body: bytes, version: bytes = b"\x03\x03") -> bytes:
    return bytes([content_type]) + version + struct.pack(">H", len(body) & 0xFFFF) + body


class TlsLink(Link):
    """A TLS client on ``ssl.MemoryBIO``: ``write`` encrypts, ``write_raw`` puts bytes on the wire as they are."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, context: ssl.SSLContext, hostname: str | None
    ) -> None:
        super().__init__(reader, writer)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname=hostname)
        self.plain = bytearray()

    def flush(self) -> bytes:
        data = self.outgoing.read()
        if data:
            super().write(data)
        return data

    def pending(self) -> bytes:
        """What TLS wants to send, taken without sending it."""
        return self.outgoing.read()

    def step_handshake(self) -> str | None:
        """One handshake step on what was received: None when done, ``want`` for more input, or the error."""
        try:
            self.tls.do_handshake()
            return None
        except ssl.SSLWantReadError:
            return "want"
        except ssl.SSLError as exc:
            return f"{exc.reason or exc}"

    async def receive(self, timeout: float) -> bool:
        """Feed the next bytes the server sends to TLS; False on end of stream."""
        try:
            async with asyncio.timeout(timeout):
                data = await self.reader.read(65536)
        except TimeoutError:
            raise Stalled from None
        except (ConnectionResetError, BrokenPipeError):
            raise Closed("reset") from None
        except (ConnectionError, OSError) as exc:
            raise Closed(str(exc)) from None
        if not data:
            self.incoming.write_eof()
            return False
        self.incoming.write(data)
        return True

    async def handshake(self, timeout: float) -> str | None:
        """The whole handshake: None when done, else why not."""
        while True:
            state = self.step_handshake()
            self.flush()
            if state != "want":
                return state
            try:
                if not await self.receive(timeout):
                    return "end of stream"
            except Stalled:
                return "stalled"
            except Closed as exc:
                return str(exc)

    def write(self, data: bytes) -> None:
        try:
            self.tls.write(data)
        except ssl.SSLError:
            return  # (TLS is over: what is left is read as the end of the connection)
        self.flush()

    def write_raw(self, data: bytes) -> None:
        super().write(data)

    async def read_frame(self, timeout: float) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                while True:
                    if len(self.plain) >= SIZE.size:
                        (size,) = SIZE.unpack_from(self.plain)
                        if size < 0 or size > 64 * 2**20:
                            raise Closed(f"answer of size {size}")
                        if len(self.plain) >= SIZE.size + size:
                            frame = bytes(self.plain[SIZE.size : SIZE.size + size])
                            del self.plain[: SIZE.size + size]
                            return frame
                    try:
                        chunk = self.tls.read(65536)
                        if not chunk:
                            raise Closed("close_notify")
                        self.plain += chunk
                        continue
                    except ssl.SSLWantReadError:
                        pass
                    except ssl.SSLError as exc:
                        raise Closed(f"TLS: {exc.reason or exc}") from None
                    self.flush()
                    if not await self.receive(timeout):
                        raise Closed("end of stream")
        except TimeoutError:
            raise Stalled from None


class TlsScript(Script):
    PLANS = ((3, "garbage"), (6, "hello"), (3, "abort"), (8, "frames"), (1, "plaintext"))

    fuzz: Run
    #: the connection of the plans that speak TLS (``connect_tls``)
    tls_link: TlsLink

    async def plan_garbage(self) -> None:
        await self.connect()
        rng = self.rng
        size = pick(rng, [(3, rng.randint(1, 8)), (4, rng.randint(9, 300)), (1, rng.randint(1000, 20000))])
        body = rng.randbytes(size)
        if rng.random() < 0.5:  # something like a record header first
            content_type = rng.choice((HANDSHAKE, HANDSHAKE, CHANGE_CIPHER_SPEC, ALERT, APPLICATION_DATA, 24, 0, 255))
            version = rng.choice((b"\x03\x01", b"\x03\x03", b"\x03\x04", b"\x03\x00", b"\xfe\xfd", b"\x00\x00"))
            length = rng.choice((len(body), len(body) + 1, 0, 0x4000, 0x4801, 0xFFFF))
            body = bytes([content_type]) + version + struct.pack(">H", length) + body
        await self.write_in_pieces(body, "garbage")
        await self.settle()

    async def plan_hello(self) -> None:
        link = await self.connect()
        rng = self.rng
        hello = self.client_hello()
        data, hows = hello, []
        for _ in range(pick(rng, [(4, 1), (1, 2)])):
            data, how = self.mutate_hello(data)
            hows.append(how)
        await self.write_in_pieces(data, "ClientHello " + "+".join(hows))
        try:
            async with asyncio.timeout(LINGER):
                answered = bool(await link.reader.read(65536))
        except (TimeoutError, ConnectionError, OSError):
            answered = False
        self.outcomes[f"tls hello: {'answered' if answered else 'no answer'}"] += 1
        if not answered:
            await self.settle()
            return
        follow = rng.randrange(4)
        if follow == 0:
            self.write_raw(rng.randbytes(rng.randint(1, 200)), "garbage after the server's answer")
        elif follow == 1:
            self.write_raw(hello, "the ClientHello again")
        elif follow == 2:
            self.write_raw(record(ALERT, b"\x02\x28"), "a fatal alert")
        await self.settle()

    async def plan_abort(self) -> None:
        """A real handshake up to the server's first flight, then a broken client flight."""
        await self.connect_tls()
        link = self.tls_link
        rng = self.rng
        link.step_handshake()
        first = link.pending()
        self.write_raw(first, "ClientHello")
        try:
            while True:
                if not await link.receive(self.stall):
                    self.outcomes["tls abort: closed early"] += 1
                    return
                state = link.step_handshake()
                if state != "want" or link.outgoing.pending:
                    break
        except (Stalled, Closed):
            self.outcomes["tls abort: no server flight"] += 1
            return
        flight = link.pending()
        kind = rng.randrange(7)
        if kind == 0 and flight:
            cut = rng.randint(1, max(1, len(flight) - 1))
            self.write_raw(flight[:cut], f"client flight truncated at {cut} of {len(flight)}")
        elif kind == 1 and flight:
            garbled = bytearray(flight)
            for _ in range(rng.randint(1, 4)):
                garbled[rng.randrange(len(garbled))] ^= 1 << rng.randrange(8)
            self.write_raw(bytes(garbled), "client flight bit-flipped")
        elif kind == 2:
            self.write_raw(record(ALERT, bytes([rng.choice((1, 2)), rng.randrange(256)])), "an alert instead")
        elif kind == 3:
            self.write_raw(record(APPLICATION_DATA, rng.randbytes(rng.randint(0, 300))), "application data instead")
        elif kind == 4 and flight:
            self.write_raw(flight + flight, "client flight twice")
        elif kind == 5:
            self.write_raw(first, "the ClientHello again")
        else:
            self.outcomes["tls abort: closed"] += 1
            return
        await self.settle()

    async def plan_frames(self) -> None:
        """A complete handshake, then mutated frames through TLS; sometimes a TLS-level ending."""
        rng = self.rng
        name = pick(rng, [(5, "plain"), (2, "tls12"), (2, "mapped"), (1, "unmapped"), (1, "untrusted")])
        await self.connect_tls(name)
        link = self.tls_link
        failed = await link.handshake(self.stall)
        self.outcomes[f"tls handshake {name}: {'ok' if failed is None else 'failed'}"] += 1
        if failed is not None:
            if name != "untrusted" and failed not in ("stalled", "reset"):
                self.protocol("a valid client's TLS handshake failed", f"{name}: {failed}")
            return
        if name in ("untrusted", "unmapped"):
            # TLS 1.3 finishes the client's handshake before the server checks its certificate: the refusal
            # comes after; in no case may a request be answered
            self.send_mutant(self.valid_request(), forbidden=True)
            await self.expect_close(f"a request over TLS with an {name} client certificate")
            return
        await self.mutated_frames(rng.choice((4, 8, 16, 32, 64)))
        if self.ended or rng.random() < 0.5:
            return
        await self.tls_ending()

    async def plan_plaintext(self) -> None:
        await self.connect()
        frame = encode_request(API_VERSIONS, self.rng.randint(0, 2), self.next_correlation(), "fuzz")
        await self.write_in_pieces(frame * self.rng.randint(1, 3), "Kafka requests in the clear")
        await self.settle()

    # ------------------------------------------------------------------------------ parts
    async def connect_tls(self, context: str = "plain") -> None:
        link = await Link.open(self.fuzz.server.port)
        self.tls_link = TlsLink(link.reader, link.writer, self.fuzz.contexts[context], "localhost")
        self.link = self.tls_link
        self.fuzz.by_port[link.local_port] = self

    async def tls_ending(self) -> None:
        link = self.tls_link
        rng = self.rng
        kind = rng.randrange(5)
        if kind == 0:
            self.write_raw(record(APPLICATION_DATA, rng.randbytes(rng.randint(17, 400))), "a forged record")
        elif kind == 1:
            link.tls.write(encode_request(API_VERSIONS, 2, self.next_correlation(), "fuzz"))
            sealed = link.pending()
            cut = rng.randint(1, len(sealed) - 1)
            self.write_raw(sealed[:cut], f"a record truncated at {cut} of {len(sealed)}")
            link.write_eof()
        elif kind == 2:
            with contextlib.suppress(ssl.SSLError):
                link.tls.unwrap()
            link.flush()
            self.write_raw(encode_request(API_VERSIONS, 2, self.next_correlation(), "fuzz"), "close_notify, then clear")
        elif kind == 3:
            self.write_raw(encode_request(API_VERSIONS, 2, self.next_correlation(), "fuzz"), "a Kafka frame in clear")
        else:
            link.tls.write(encode_request(API_VERSIONS, 2, self.next_correlation(), "fuzz"))
            sealed = bytearray(link.pending())
            sealed[rng.randrange(5, len(sealed))] ^= 1 << rng.randrange(8)
            self.write_raw(bytes(sealed), "a record with a flipped bit")
        await self.settle()

    def write_raw(self, data: bytes, how: str) -> None:
        self.send(data, -1, -1, how, answered=False, raw=True)

    async def write_in_pieces(self, data: bytes, how: str) -> None:
        """``data`` in one write, or in several (a few bytes at a time, or halves) with pauses between."""
        assert self.link is not None
        rng = self.rng
        kind = rng.randrange(4)
        if kind == 0 or len(data) < 2:
            self.write_raw(data, how)
            return
        if kind == 1:
            pieces = [data[i : i + 1] for i in range(min(len(data), 40))] + [data[40:]]
        else:
            cut = rng.randint(1, len(data) - 1)
            pieces = [data[:cut], data[cut:]]
        self.write_raw(pieces[0], f"{how} (in {len(pieces)} writes)")
        for piece in pieces[1:]:
            await self.link.drain()
            if kind == 3:
                await asyncio.sleep(0.01)
            if piece:
                self.link.write_raw(piece)

    async def settle(self) -> None:
        """Give the server ``LINGER`` to react; half-close or just leave sometimes."""
        assert self.link is not None
        if self.rng.random() < 0.3:
            self.link.write_eof()
        closed = await self.link.closes(LINGER)
        self.outcomes["tls: closed by the server" if closed else "tls: left open"] += 1

    def client_hello(self) -> bytes:
        rng = self.rng
        context = rng.choice(self.fuzz.hello_contexts)
        name = rng.choice(("localhost", None, "a" * 63 + ".example", f"h{rng.randrange(10**6)}.fuzz", "xn--caf-dma.x"))
        tls = context.wrap_bio(ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(), server_hostname=name)
        with contextlib.suppress(ssl.SSLWantReadError):
            tls.do_handshake()
        return outgoing.read()

    def mutate_hello(self, hello: bytes) -> tuple[bytes, str]:
        rng = self.rng
        data = bytearray(hello)
        kind = rng.randrange(11)
        if kind == 0 and len(data) > 1:
            cut = rng.randint(1, len(data) - 1)
            return bytes(data[:cut]), f"truncated@{cut}"
        if kind == 1 and data:
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            return bytes(data), "bitflip"
        if kind == 2 and len(data) >= 5:
            length = rng.choice((0, 1, len(data) - 6, len(data) - 4, 0x4000, 0x4001, 0xFFFF))
            data[3:5] = struct.pack(">H", max(0, length) & 0xFFFF)
            return bytes(data), f"record length {length}"
        if kind == 3 and len(data) >= 9:
            length = rng.choice((0, 1, 0xFFFFFF, len(data) - 8, len(data)))
            data[6:9] = (max(0, length) & 0xFFFFFF).to_bytes(3, "big")
            return bytes(data), f"handshake length {length}"
        if kind == 4 and len(data) > 6:
            body, pieces, at = bytes(data[5:]), [], 0
            while at < len(body):
                size = rng.randint(1, max(1, len(body) // 2))
                pieces.append(record(HANDSHAKE, body[at : at + size], bytes(data[1:3])))
                at += size
            return b"".join(pieces), f"in {len(pieces)} records"
        if kind == 5:
            front = rng.choice(
                (
                    record(CHANGE_CIPHER_SPEC, b"\x01"),
                    record(ALERT, b"\x01\x00"),
                    record(APPLICATION_DATA, b""),
                    record(24, b"\x01\x40\x00" + rng.randbytes(16)),
                    record(HANDSHAKE, b""),
                    b"\x80\x2e\x01\x03\x01" + rng.randbytes(40),
                )
            )
            return front + bytes(data), f"behind {front[:5].hex()}"
        if kind == 6:
            return bytes(data) + rng.randbytes(rng.randint(1, 500)), "garbage after"
        if kind == 7:
            return bytes(data) * 2, "twice"
        if kind == 8 and len(data) >= 3:
            data[1:3] = rng.choice((b"\x03\x00", b"\x03\x04", b"\xfe\xff", b"\x00\x00", b"\x7f\x7f"))
            return bytes(data), f"record version {bytes(data[1:3]).hex()}"
        if kind == 9 and len(data) > 5:
            pos = rng.randrange(5, len(data))
            data[pos:pos] = rng.randbytes(rng.randint(1, 64))
            return bytes(data), f"insert@{pos}"
        data[0] = rng.choice((0, 1, CHANGE_CIPHER_SPEC, ALERT, APPLICATION_DATA, 24, 0x80, 0xFF))
        return bytes(data), f"content type {data[0]}"

    def valid_request(self) -> Mutant:
        correlation_id = self.next_correlation()
        frame = encode_request(API_VERSIONS, 2, correlation_id, self.client_id.decode())
        return Mutant(frame, API_VERSIONS, 2, "ApiVersions v2")


class Run(ScriptRun):
    mode = "tls"
    server: TlsServer

    def __init__(self, options: Options, server: ServerProcess) -> None:
        super().__init__(options, server, TlsScript)
        assert isinstance(server, TlsServer)
        self.contexts = client_contexts(server.certificates)
        self.hello_contexts = hello_contexts()

    async def _health_check(self) -> bool:
        return await _health_check(self.server.port, self.contexts["plain"])
