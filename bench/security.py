"""What security costs on ``regroup serve``: TLS + SASL against PLAINTEXT, the ACL authorizer with 10,000 ACLs
against none, and SASL connection set-up against a plain connect, each measured side by side in one run.

Usage::

    .venv/bin/python bench/security.py                              # all three parts, ~4.5 min
    .venv/bin/python bench/security.py --parts tls --rounds 4       # one part
    .venv/bin/python bench/security.py --parts acl --acls 20000 --hb-seconds 3
    .venv/bin/python bench/security.py --parts '' --profile         # only: the server under cProfile
    .venv/bin/python bench/security.py --json /tmp/bench-security.json

The servers are ``regroup serve --config server.properties`` subprocesses started the way ``bench/server.py``
starts them (its ``ServerProcess``: loopback, a temporary data directory, ``--fsync always``,
``--initial-rebalance-delay-ms 0``), with Kafka's property names for the listeners, SASL, TLS and the
authorizer. The certificates come from ``tests/server/certs.py``'s ``Authority`` (an EC P-256 CA and a server
certificate for 127.0.0.1 / localhost); the SCRAM user is seeded with ``regroup users add`` (Kafka's 4,096
iterations) before the server starts. The client is ``bench/server.py``'s raw-wire load generator: one asyncio
process, requests kio-encoded (heartbeats encoded once per member, only the correlation id patched per send),
over plain asyncio connections, with the standard library's ``ssl`` (OpenSSL) for TLS. No Kafka client library.

**Part "tls": heartbeats through SASL_SSL against PLAINTEXT, one server.** One server with three listeners,
PLAINTEXT, SASL_PLAINTEXT and SASL_SSL (mechanisms PLAIN and SCRAM-SHA-512), so that only the listener
differs. A 1,000-member classic group is formed on the PLAINTEXT listener (``bench/server.py``'s join case);
then its members heartbeat flat out (Heartbeat v4, one in flight per member, ``bench/server.py``'s
``HeartbeatDriver``) over connections of one listener at a time: PLAINTEXT; SASL_PLAINTEXT authenticated with
SCRAM-SHA-512 (the SASL session's own cost); SASL_SSL authenticated with SCRAM-SHA-512 (TLS on top). The
connections are opened and authenticated before the first window and kept for all rounds. Layouts
``MEMBERS:CONNECTIONS`` (``--tls-layouts``) as in ``bench/server.py``: ``1000:10`` pipelines 100 heartbeats
per connection (TLS records carry many requests), ``100:100`` has one request per connection and per TLS
record. Reported per window: heartbeats per second, latency p50 / p99 (write of the request to read of its
response), server and client CPU per request.

**Part "acl": the authorizer with 10,000 ACLs.** Three servers side by side, identical but for the
authorizer: ``none`` (``authorizer.class.name`` unset), ``needed`` (StandardAuthorizer with only the ACL the
members need: ALLOW ``User:alice`` READ on the group) and ``10k`` (the same plus 9,999 more: LITERAL and
PREFIXED, on other groups and topics, prefixes of 10 to 39 characters, and some on the benchmark group itself
for other principals, a DENY and a ``User:*`` among them, see ``acl_creations``). Every server has one
SASL_PLAINTEXT listener with PLAIN; ``User:admin`` is a super user and loads the ACLs over the wire with
CreateAcls v3 in batches of ``--acl-batch``; the members are ``User:alice`` (1,000 connections for the join,
then the heartbeat layout's connections). Before the windows each server is checked: ``User:bob``'s heartbeat
is GROUP_AUTHORIZATION_FAILED with an authorizer and answered without one. The authorizer's decision is also
timed in-process (``Authorizer.authorize`` on the same ACLs), for its share of a heartbeat's server CPU.

**Part "connect": connections per second.** On the part-"tls" server, ``--connect-concurrency`` clients each
open, use and close connections back to back for ``--connect-seconds``: PLAINTEXT (connect + ApiVersions v3 +
close), SASL_PLAINTEXT with PLAIN (connect + ApiVersions + SaslHandshake v1 + one SaslAuthenticate v2 +
close), SASL_PLAINTEXT with SCRAM-SHA-512 at 4,096 iterations (... + two SaslAuthenticate, the server's
signature checked) and SASL_SSL with SCRAM-SHA-512 (the TLS handshake first). The client computes SCRAM's
salted password (PBKDF2, 4,096 iterations) once and caches it, so the per-connection client work is a few
HMACs; a Java client recomputes it on every connection. The server never runs PBKDF2 in an exchange: it keeps
Kafka's StoredKey and ServerKey.

Every part alternates its variants in short windows (heartbeats: ``--hb-seconds`` 1 after 0.3 s of warm-up;
connections: ``--connect-seconds`` 1.5), in rounds A B C then C B A, ... (``--rounds`` 12, ``--acl-rounds``
16, ``--connect-rounds`` 8), so that the load of other work on the machine hits all variants alike; the
summary gives the medians over the rounds and, for each variant, the median of its per-round ratios to the
baseline (PLAINTEXT; no authorizer) in the same round. Server CPU is the on-CPU time of the server's threads
(``/proc/PID/task/*/schedstat``, nanoseconds), client CPU this process's ``time.process_time()``.
``--profile`` adds four servers under cProfile (``bench/server.py``'s ``--serve-profiled``), one per window:
heartbeats over PLAINTEXT and over SASL_SSL (``--profile-layout``, 100:100), connections over PLAINTEXT and
over SASL_SSL with SCRAM-SHA-512.

Bounds: every phase has ``bench/server.py``'s deadlines; heartbeats stop at the end of their window; servers
are stopped with SIGTERM (SIGKILL after 30 s) even on failure; only 127.0.0.1 is used. Run one benchmark at a
time: the load generator and the servers share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import signal
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from regroup.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from regroup.security.authorizer import Authorizer
from regroup.security.bindings import AclBinding
from server_loader import load_server_bench

REPO = Path(__file__).resolve().parents[1]


sb = load_server_bench()

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS, CREATE_ACLS = 17, 36, 18, 30
HANDSHAKE_V, AUTHENTICATE_V, API_VERSIONS_V, CREATE_ACLS_V = 1, 2, 3, 3
GROUP_AUTHORIZATION_FAILED = 30
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM = "SCRAM-SHA-512"
ADMIN, ALICE, BOB = ("admin", "admin-pw-1"), ("alice", "alice-pw-2"), ("bob", "bob-pw-3")
CAROL = ("carol", "carol-pw-4")  # the SCRAM user
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in (ADMIN, ALICE, BOB, CAROL))
    + ";"
)
TLS_GROUP = "bench-security-tls"
ACL_GROUP = "bench-security-heartbeats"
TARGET_TLS_COST = 0.25  # SASL_SSL heartbeats at most 25 % below PLAINTEXT
TARGET_AUTHZ_COST = 0.05  # 10,000 ACLs cost at most 5 % per heartbeat
WAVE = 100  # connections opened at once
_LISTENING = re.compile(r"listening listener=(\S+) protocol=\S+ host=\S+ port=(\d+)")
_FIRST = re.compile(r"serving host=\S+ port=(\d+) .*? listener=(\S+) protocol=")


# ---------------------------------------------------------------------------------------------------------------
# servers


class SecureServer(sb.ServerProcess):  # type: ignore[misc,name-defined]
    """``bench/server.py``'s server process with ``--config`` (``properties``) and SCRAM users seeded first;
    ``ports`` maps each listener's name to its port."""

    def __init__(
        self,
        properties: str,
        data_root: str | None,
        scram_users: Sequence[tuple[str, str, str]] = (),
        profile_out: Path | None = None,
        event_loop: str = "auto",
    ) -> None:
        super().__init__("always", data_root, profile_out)
        self.event_loop = event_loop
        self.properties = properties
        self.config_path = self.dir / "server.properties"
        self.scram_users = scram_users
        self.ports: dict[str, int] = {}

    def command(self) -> list[str]:
        return [*super().command(), "--config", str(self.config_path), "--event-loop", self.event_loop]

    def cpu_seconds(self) -> float:
        """The on-CPU time of the server's threads so far, in nanoseconds' precision (``schedstat``; a short
        window measured in clock ticks would be off by a few per cent)."""
        assert self.proc is not None
        total = 0
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that just ended
                total += int((task / "schedstat").read_text().split()[0])
        return total / 1e9

    def start(self) -> None:
        self.config_path.write_text(self.properties)
        for mechanism, user, password in self.scram_users:
            subprocess.run(
                [sys.executable, "-m", "regroup", "users", "add", "--data-dir", str(self.dir / "data"),
                 "--mechanism", mechanism, "--user", user, "--password", password],
                check=True, capture_output=True,
            )  # fmt: skip
        super().start()
        text = self.log_path.read_text(errors="replace")
        self.ports = {name: int(port) for name, port in _LISTENING.findall(text)}
        first = _FIRST.search(text)
        sb.expect(first is not None, "no 'serving' line with the first listener's name")
        assert first is not None
        self.ports[first.group(2)] = int(first.group(1))


@contextlib.contextmanager
def running(servers: Sequence[SecureServer], keep: bool) -> Iterator[None]:
    started: list[SecureServer] = []
    try:
        for server in servers:
            server.start()
            started.append(server)
        yield
    except BaseException:
        for server in servers:
            print(server.log_tail(), file=sys.stderr)
        raise
    finally:
        for server in started or servers:
            server.stop(keep)


def keystore(directory: Path) -> tuple[Path, Path]:
    """(server key store, CA certificate): PEM files made by ``tests/server/certs.py``'s ``Authority``."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.server.certs import Authority

    authority = Authority(directory / "ca")
    issued = authority.server()
    path = directory / "keystore.pem"
    path.write_text(issued.key_pem + issued.cert_pem)
    return path, authority.cert


def security_properties(keystore_path: Path) -> str:
    """The part-"tls" server: PLAINTEXT first (where the group forms), SASL_PLAINTEXT, SASL_SSL."""
    return (
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0\n"
        f"sasl.enabled.mechanisms=PLAIN,{SCRAM}\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}\n"
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore_path}\n"
    )


def acl_properties(authorizer: bool) -> str:
    """A part-"acl" server: one SASL_PLAINTEXT listener with PLAIN; with the authorizer, ``User:admin`` super."""
    text = (
        "listeners=SASL_PLAINTEXT://127.0.0.1:0\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}\n"
    )
    if authorizer:
        text += f"authorizer.class.name={STANDARD_AUTHORIZER}\nsuper.users=User:{ADMIN[0]}\n"
    return text


# ---------------------------------------------------------------------------------------------------------------
# the client: connections, SASL


async def open_connection(port: int, tls: ssl.SSLContext | None) -> Any:
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(
        sb.KafkaConnection, sb.HOST, port, ssl=tls, server_hostname="localhost" if tls is not None else None
    )
    return conn


def raw_call(conn: Any, template: bytes) -> asyncio.Future[bytes]:
    """Send a pre-encoded request (its correlation id patched); the future resolves to the response frame."""
    correlation_id = conn.next_correlation_id()
    data = bytearray(template)
    struct.pack_into(">i", data, 8, correlation_id)
    future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def on_frame(frame: bytes, _: Any) -> None:
        if future.done():
            return
        if frame:
            future.set_result(frame)
        else:
            future.set_exception(sb.WireError("connection lost before the response"))

    conn.send(data, correlation_id, on_frame, None)
    return future


API_VERSIONS_FRAME = bytes(
    sb.encode_request(API_VERSIONS, API_VERSIONS_V, 0, client_software_name="bench", client_software_version="1")
)
HANDSHAKE_FRAMES = {m: bytes(sb.encode_request(SASL_HANDSHAKE, HANDSHAKE_V, 0, mechanism=m)) for m in ("PLAIN", SCRAM)}
_NON_FLEXIBLE_ERROR = slice(4, 6)  # ApiVersions and SaslHandshake v1 responses: correlation id, error code


def plain_token(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


class ScramClient:
    """The client side of one SCRAM-SHA-512 exchange (RFC 5802). The salted password and the keys derived
    from it are computed once per (password, salt, iterations) and cached."""

    _keys: ClassVar[dict[tuple[str, bytes, int], tuple[bytes, bytes, bytes]]] = {}

    def __init__(self, user: str, password: str) -> None:
        self.password = password
        self.nonce = secrets.token_urlsafe(18)
        self.bare = f"n={user},r={self.nonce}"
        self.auth_message = b""
        self.server_key = b""

    def first(self) -> bytes:
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        fields = dict(item.split("=", 1) for item in text.split(","))
        combined, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        sb.expect(combined.startswith(self.nonce), "the server nonce does not extend the client's")
        key = (self.password, salt, iterations)
        if key not in self._keys:
            salted = hashlib.pbkdf2_hmac("sha512", self.password.encode(), salt, iterations)
            client_key = hmac.new(salted, b"Client Key", "sha512").digest()
            server_key = hmac.new(salted, b"Server Key", "sha512").digest()
            self._keys[key] = (client_key, hashlib.sha512(client_key).digest(), server_key)
        client_key, stored_key, self.server_key = self._keys[key]
        without_proof = f"c=biws,r={combined}"  # biws: base64 of the GS2 header "n,,"
        self.auth_message = f"{self.bare},{text},{without_proof}".encode()
        signature = hmac.new(stored_key, self.auth_message, "sha512").digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        signature = hmac.new(self.server_key, self.auth_message, "sha512").digest()
        return bytes(server_final) == b"v=" + base64.b64encode(signature)


async def authenticate(conn: Any, mechanism: str, user: str, password: str) -> None:
    """SaslHandshake v1 and SaslAuthenticate v2 exchanges of ``mechanism`` (PLAIN or SCRAM-SHA-512)."""
    frame = await sb.bounded(raw_call(conn, HANDSHAKE_FRAMES[mechanism]), "SaslHandshake")
    sb.expect(frame[_NON_FLEXIBLE_ERROR] == b"\0\0", f"SaslHandshake error {frame[_NON_FLEXIBLE_ERROR].hex()}")

    async def step(token: bytes) -> bytes:
        response = await sb.bounded(sb._request(conn, SASL_AUTHENTICATE, AUTHENTICATE_V, auth_bytes=token), "SASL")
        sb.expect(response.error_code == 0, f"{mechanism} as {user}: {response.error_code} {response.error_message}")
        return bytes(response.auth_bytes)

    if mechanism == "PLAIN":
        await step(plain_token(user, password))
        return
    scram = ScramClient(user, password)
    server_first = await step(scram.first())
    server_final = await step(scram.final(server_first))
    sb.expect(scram.verify(server_final), "the server's SCRAM signature does not verify")


async def connect(
    port: int, tls: ssl.SSLContext | None = None, mechanism: str | None = None, credentials: tuple[str, str] = ALICE
) -> Any:
    conn = await sb.bounded(open_connection(port, tls), "connect")
    if mechanism is not None:
        try:
            await authenticate(conn, mechanism, *credentials)
        except BaseException:
            conn.close()
            raise
    return conn


async def connect_many(n: int, *args: Any) -> list[Any]:
    conns: list[Any] = []
    try:
        for start in range(0, n, WAVE):  # in waves: the listen backlog is finite
            wave = [connect(*args) for _ in range(start, min(n, start + WAVE))]
            conns += await sb.bounded(asyncio.gather(*wave), "connect")
    except BaseException:
        close_all(conns)
        raise
    return conns


def close_all(conns: Sequence[Any]) -> None:
    for conn in conns:
        conn.close()


def tls_facts(conn: Any) -> dict[str, Any]:
    tls = conn.transport.get_extra_info("ssl_object")
    return {"version": tls.version(), "cipher": tls.cipher()[0], "openssl": ssl.OPENSSL_VERSION}


# ---------------------------------------------------------------------------------------------------------------
# heartbeats


def heartbeat_templates(joined: Any, members: int) -> list[bytes]:
    return [
        sb.encode_request(
            sb.HEARTBEAT,
            sb.HEARTBEAT_V,
            0,
            group_id=joined.group,
            generation_id=joined.generation,
            member_id=member_id,
            group_instance_id=None,
        )
        for member_id in joined.member_ids[:members]
    ]


async def heartbeat_window(
    server: SecureServer, templates: list[bytes], conns: list[Any], seconds: float, warmup: float
) -> Any:
    """``bench/server.py``'s heartbeat case over connections opened (and authenticated) already."""
    return await sb.heartbeat_window(server, templates, conns, seconds, warmup, 50_000_000)


async def form_group(server: SecureServer, port: int, members: int, group: str, *auth: Any) -> Any:
    """``bench/server.py``'s join case on ``port`` (members authenticated with ``auth``: tls, mechanism,
    credentials); returns the joined group, generation 2."""
    admin = await connect(port, *(auth[:2]), ADMIN) if auth else await connect(port)
    conns = await connect_many(members, port, *auth)
    try:
        run, joined = await sb.join_case(server, conns, admin, group)
    finally:
        close_all([*conns, admin])
    return run, joined


@dataclass(slots=True)
class HbSample:
    part: str
    variant: str
    layout: str
    round: int
    run: Any

    def row(self) -> dict[str, Any]:
        labels = {"part": self.part, "variant": self.variant, "layout": self.layout, "round": self.round}
        return {**labels, **asdict(self.run)}


def describe_hb(hb: Any) -> str:
    return (
        f"{hb.per_second:,.0f} req/s, p50 {hb.p50_ms:.2f} ms, p99 {hb.p99_ms:.2f} ms; server "
        f"{hb.server_cpu_s / hb.responses * 1e6:.1f} µs/req, client {hb.client_cpu_s / hb.responses * 1e6:.1f} µs/req"
    )


def ordered(variants: Sequence[str], round_: int) -> list[str]:
    return list(variants) if round_ % 2 else list(variants)[::-1]


def parse_layouts(text: str) -> list[tuple[int, int]]:
    return sb.parse_layouts(text) if text else []  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------------------------------
# part "tls"

TLS_VARIANTS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL")


async def run_tls_part(
    args: argparse.Namespace, server: SecureServer, client_tls: ssl.SSLContext, report: Callable[[str], None]
) -> tuple[list[HbSample], dict[str, Any]]:
    layouts = parse_layouts(args.tls_layouts)
    join, joined = await form_group(server, server.ports["PLAINTEXT"], args.members, TLS_GROUP)
    report(f"  group formed on PLAINTEXT: {args.members} members, join window {join.seconds * 1e3:.0f} ms")
    most = max(c for _, c in layouts)
    conns: dict[str, list[Any]] = {}
    started = time.perf_counter()
    conns["PLAINTEXT"] = await connect_many(most, server.ports["PLAINTEXT"])
    conns["SASL_PLAINTEXT"] = await connect_many(most, server.ports["SASL_PLAINTEXT"], None, SCRAM, CAROL)
    conns["SASL_SSL"] = await connect_many(most, server.ports["SASL_SSL"], client_tls, SCRAM, CAROL)
    facts = tls_facts(conns["SASL_SSL"][0])
    report(f"  {3 * most} connections opened and authenticated in {time.perf_counter() - started:.1f} s; TLS {facts}")
    samples: list[HbSample] = []
    try:
        for round_ in range(1, args.rounds + 1):
            for members, connections in layouts:
                templates = heartbeat_templates(joined, members)
                for variant in ordered(TLS_VARIANTS, round_):
                    hb = await heartbeat_window(
                        server, templates, conns[variant][:connections], args.hb_seconds, args.hb_warmup
                    )
                    samples.append(HbSample("tls", variant, f"{members}:{connections}", round_, hb))
                    report(f"  round {round_} {members}:{connections} {variant:<14} {describe_hb(hb)}")
    finally:
        for group in conns.values():
            close_all(group)
    return samples, facts


# ---------------------------------------------------------------------------------------------------------------
# part "acl"

ACL_VARIANTS = ("none", "needed", "10k")


def _acl(
    resource_type: ResourceType,
    name: str,
    pattern: PatternType,
    principal: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def acl_creations(total: int, group: str, member: str) -> list[AclBinding]:
    """The ``needed`` ACL (first) and ``total - 1`` others: about 2 % on the benchmark group or a prefix of it
    for other principals (a DENY, a ``User:*`` DESCRIBE among them), 30 % PREFIXED on other groups and topics
    (prefixes of 10 to 39 characters, so the prefix index has 30 lengths to probe), the rest LITERAL on other
    groups and topics."""
    literal, prefixed = PatternType.LITERAL, PatternType.PREFIXED
    group_t, topic_t = ResourceType.GROUP, ResourceType.TOPIC
    read, write, describe = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
    acls = [_acl(group_t, group, literal, member, read)]
    acls += [_acl(group_t, group, literal, f"User:user-{i}", read) for i in range(100)]
    acls += [_acl(group_t, group, literal, "User:mallory", read, AclPermissionType.DENY)]
    acls += [_acl(group_t, group, literal, "User:*", describe)]
    acls += [_acl(group_t, group[:6], prefixed, f"User:team-{i}", read, host=f"10.0.0.{i}") for i in range(50)]
    acls += [_acl(group_t, group[:14], prefixed, f"User:ops-{i}", describe) for i in range(50)]
    n_prefixed = (total * 3) // 10
    for i in range(n_prefixed):
        prefix = f"team{i:05d}." + "x" * (i % 30)
        kind = group_t if i % 2 else topic_t
        acls.append(_acl(kind, prefix, prefixed, f"User:user-{i % 500}", read if i % 3 else describe))
    i = 0
    while len(acls) < total:
        if i % 3 == 0:
            acls.append(_acl(group_t, f"group-{i:06d}", literal, f"User:user-{i % 500}", read))
        else:
            acls.append(_acl(topic_t, f"topic-{i:06d}", literal, f"User:user-{i % 500}", (read, write)[i % 2]))
        i += 1
    return acls[:total]


async def create_acls(admin: Any, acls: Sequence[AclBinding], batch: int) -> list[float]:
    """CreateAcls v3 in batches; the seconds each batch took."""
    times = []
    for start in range(0, len(acls), batch):
        creations = [
            {
                "resource_type": a.resource_type,
                "resource_name": a.resource_name,
                "resource_pattern_type": a.pattern_type,
                "principal": a.principal,
                "host": a.host,
                "operation": a.operation,
                "permission_type": a.permission,
            }
            for a in acls[start : start + batch]
        ]
        started = time.perf_counter()
        response = await sb.bounded(sb._request(admin, CREATE_ACLS, CREATE_ACLS_V, creations=creations), "CreateAcls")
        times.append(time.perf_counter() - started)
        failed = [(r.error_code, r.error_message) for r in response.results if r.error_code != 0]
        sb.expect(len(response.results) == len(creations) and not failed, f"CreateAcls failed: {failed[:3]}")
    return times


async def bob_heartbeat_error(port: int, joined: Any) -> int:
    """The error code of a heartbeat (of a real member) sent by ``User:bob``, who has no ACL."""
    conn = await connect(port, None, "PLAIN", BOB)
    try:
        response = await sb.bounded(
            sb._request(
                conn,
                sb.HEARTBEAT,
                sb.HEARTBEAT_V,
                group_id=joined.group,
                generation_id=joined.generation,
                member_id=joined.member_ids[0],
                group_instance_id=None,
            ),
            "Heartbeat",
        )
    finally:
        conn.close()
    return int(response.error_code)


def authorize_micro(acls: Sequence[AclBinding], group: str, member: str, n: int = 20_000) -> dict[str, float]:
    """``Authorizer.authorize`` for the members' heartbeat, in-process: µs per decision, the best of 25 runs of
    ``n`` decisions (short runs, so that some run is not preempted by other work on the machine)."""
    out = {}
    for name, bindings in (("needed", acls[:1]), ("10k", acls)):
        authorizer = Authorizer(frozenset({f"User:{ADMIN[0]}"}))
        authorizer.add(bindings)
        check = authorizer.authorize
        sb.expect(check(member, "127.0.0.1", AclOperation.READ, ResourceType.GROUP, group), "not allowed")
        best = float("inf")
        for _ in range(25):
            started = time.perf_counter()
            for _ in range(n):
                check(member, "127.0.0.1", AclOperation.READ, ResourceType.GROUP, group)
            best = min(best, time.perf_counter() - started)
        out[name] = best / n * 1e6
    return out


async def run_acl_part(
    args: argparse.Namespace, servers: dict[str, SecureServer], report: Callable[[str], None]
) -> tuple[list[HbSample], dict[str, Any]]:
    layouts = parse_layouts(args.acl_layouts)
    member = f"User:{ALICE[0]}"
    acls = acl_creations(args.acls, ACL_GROUP, member)
    facts: dict[str, Any] = {"acls": len(acls)}
    ports = {name: server.ports["SASL_PLAINTEXT"] for name, server in servers.items()}
    for name, count in (("needed", 1), ("10k", len(acls))):
        admin = await connect(ports[name], None, "PLAIN", ADMIN)
        try:
            times = await create_acls(admin, acls[:count], args.acl_batch)
        finally:
            admin.close()
        facts[f"create_{name}_s"] = times
        report(
            f"  {name}: {count:,} ACLs created in {len(times)} CreateAcls, {sum(times):.2f} s "
            f"(first batch {times[0] * 1e3:.0f} ms, last {times[-1] * 1e3:.0f} ms)"
        )
    joined_by: dict[str, Any] = {}
    for name in ACL_VARIANTS:
        join, joined_by[name] = await form_group(servers[name], ports[name], args.members, ACL_GROUP, None, "PLAIN")
        code = await bob_heartbeat_error(ports[name], joined_by[name])
        expected = 0 if name == "none" else GROUP_AUTHORIZATION_FAILED
        sb.expect(code == expected, f"{name}: User:bob's heartbeat got error {code}, expected {expected}")
        report(f"  {name}: group formed ({join.seconds * 1e3:.0f} ms); User:bob's heartbeat -> error {code}")
    facts["authorize_us"] = authorize_micro(acls, ACL_GROUP, member)
    report(f"  Authorizer.authorize in-process: {facts['authorize_us']} µs per decision")
    most = max(c for _, c in layouts)
    conns = {name: await connect_many(most, ports[name], None, "PLAIN", ALICE) for name in ACL_VARIANTS}
    samples: list[HbSample] = []
    try:
        for round_ in range(1, args.acl_rounds + 1):
            for members, connections in layouts:
                for name in ordered(ACL_VARIANTS, round_):
                    templates = heartbeat_templates(joined_by[name], members)
                    hb = await heartbeat_window(
                        servers[name], templates, conns[name][:connections], args.hb_seconds, args.hb_warmup
                    )
                    samples.append(HbSample("acl", name, f"{members}:{connections}", round_, hb))
                    report(f"  round {round_} {members}:{connections} {name:<7} {describe_hb(hb)}")
    finally:
        for group in conns.values():
            close_all(group)
    return samples, facts


# ---------------------------------------------------------------------------------------------------------------
# part "connect"

CONNECT_VARIANTS = ("PLAINTEXT", "SASL_PLAINTEXT/PLAIN", f"SASL_PLAINTEXT/{SCRAM}", f"SASL_SSL/{SCRAM}")


@dataclass(slots=True)
class ConnectRun:
    variant: str
    round: int
    concurrency: int
    seconds: float
    connections: int
    per_second: float
    p50_ms: float
    p99_ms: float
    server_cpu_s: float
    client_cpu_s: float
    layout: str = "connect"


async def one_connection(port: int, tls: ssl.SSLContext | None, mechanism: str | None) -> None:
    """Connect, ApiVersions, [SASL handshake and exchange], close."""
    conn = await open_connection(port, tls)
    try:
        frame = await sb.bounded(raw_call(conn, API_VERSIONS_FRAME), "ApiVersions")
        sb.expect(frame[_NON_FLEXIBLE_ERROR] == b"\0\0", "ApiVersions failed")
        if mechanism is not None:
            await authenticate(conn, mechanism, *(CAROL if mechanism == SCRAM else ALICE))
    finally:
        conn.close()


async def connect_window(
    server: SecureServer,
    variant: str,
    round_: int,
    client_tls: ssl.SSLContext,
    concurrency: int,
    seconds: float,
    warmup: float,
) -> ConnectRun:
    listener, _, mechanism = variant.partition("/")
    port, tls = server.ports[listener], (client_tls if listener == "SASL_SSL" else None)
    latencies: list[int] = []
    start = time.perf_counter_ns()
    window_from, stop = start + int(warmup * 1e9), start + int((warmup + seconds) * 1e9)

    async def worker() -> None:
        while (began := time.perf_counter_ns()) < stop:
            await one_connection(port, tls, mechanism or None)
            ended = time.perf_counter_ns()
            if window_from <= ended <= stop:
                latencies.append(ended - began)

    workers = asyncio.gather(*(worker() for _ in range(concurrency)))
    await asyncio.sleep(warmup)
    server_cpu0, client_cpu0 = server.cpu_seconds(), time.process_time()
    await asyncio.sleep(max(0.0, (stop - time.perf_counter_ns()) / 1e9))
    server_cpu, client_cpu = server.cpu_seconds() - server_cpu0, time.process_time() - client_cpu0
    await sb.bounded(workers, f"{variant} connections")
    await asyncio.sleep(0.2)  # the last closes reach the server before the next variant
    ordered_ns = sorted(latencies)
    sb.expect(bool(ordered_ns), f"{variant}: no connection completed in the window")

    def pct(q: float) -> float:
        return ordered_ns[min(len(ordered_ns) - 1, int(q * len(ordered_ns)))] / 1e6

    return ConnectRun(
        variant=variant,
        round=round_,
        concurrency=concurrency,
        seconds=seconds,
        connections=len(ordered_ns),
        per_second=len(ordered_ns) / seconds,
        p50_ms=pct(0.5),
        p99_ms=pct(0.99),
        server_cpu_s=server_cpu,
        client_cpu_s=client_cpu,
    )


async def run_connect_part(
    args: argparse.Namespace, server: SecureServer, client_tls: ssl.SSLContext, report: Callable[[str], None]
) -> list[ConnectRun]:
    runs = []
    for round_ in range(1, args.connect_rounds + 1):
        for variant in ordered(CONNECT_VARIANTS, round_):
            run = await connect_window(
                server, variant, round_, client_tls, args.connect_concurrency, args.connect_seconds, 0.3
            )
            runs.append(run)
            report(
                f"  round {round_} {variant:<26} {run.per_second:,.0f} conn/s, p50 {run.p50_ms:.2f} ms, p99 "
                f"{run.p99_ms:.2f} ms; server {run.server_cpu_s / run.connections * 1e3:.2f} ms/conn, client "
                f"{run.client_cpu_s / run.connections * 1e3:.2f} ms/conn"
            )
    return runs


# ---------------------------------------------------------------------------------------------------------------
# profile


PROFILED = ("heartbeats PLAINTEXT", "heartbeats SASL_SSL", "connect PLAINTEXT", f"connect SASL_SSL/{SCRAM}")


async def profile_window(
    args: argparse.Namespace, server: SecureServer, client_tls: ssl.SSLContext, name: str, out: Path
) -> str:
    """One window of ``name`` (see ``PROFILED``) with the server's profiler on; returns the window's figures."""
    kind, _, variant = name.partition(" ")
    conns: list[Any] = []
    if kind == "heartbeats":
        members, connections = parse_layouts(args.profile_layout)[0]
        _, joined = await form_group(server, server.ports["PLAINTEXT"], members, TLS_GROUP)
        auth = (client_tls, SCRAM, CAROL) if variant == "SASL_SSL" else ()
        conns = await connect_many(connections, server.ports[variant], *auth)
    try:
        server.signal(signal.SIGUSR1)
        await asyncio.sleep(0.2)
        if kind == "heartbeats":
            hb = await heartbeat_window(server, heartbeat_templates(joined, members), conns, args.hb_seconds, 0.3)
            line = f"{members}:{connections}: {describe_hb(hb)}"
        else:
            run = await connect_window(
                server, variant, 1, client_tls, args.connect_concurrency, args.connect_seconds, 0.3
            )
            line = f"{run.per_second:,.0f} conn/s, server {run.server_cpu_s / run.connections * 1e3:.2f} ms/conn"
        server.signal(signal.SIGUSR2)
        deadline = time.monotonic() + sb.PHASE_TIMEOUT_S
        while not out.exists():
            sb.expect(time.monotonic() < deadline, "the profile was not written")
            await asyncio.sleep(0.1)
    finally:
        close_all(conns)
    return line


def run_profiles(
    args: argparse.Namespace,
    properties: str,
    scram_users: Sequence[tuple[str, str, str]],
    client_tls: ssl.SSLContext,
    tmp: Path,
    report: Callable[[str], None],
) -> dict[str, str]:
    """cProfile of the server (a fresh one for each) around each window of ``PROFILED``."""
    texts = {}
    for name in PROFILED:
        out = tmp / f"server-{len(texts)}.prof"
        server = SecureServer(properties, args.data_root, scram_users, out, args.event_loop)
        with running([server], args.keep):
            line = asyncio.run(profile_window(args, server, client_tls, name, out))
        report(f"  {name} under cProfile: {line}")
        texts[name] = f"{name}: {line}\n" + sb.profile_summary(out, args.profile_top)
        if args.profile_out:
            shutil.copyfile(out, f"{args.profile_out}.{name.replace(' ', '-').replace('/', '-')}")
    return texts


# ---------------------------------------------------------------------------------------------------------------
# summary


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def _rps(s: Any) -> float:
    return float(s.run.per_second)


def _p99(s: Any) -> float:
    return float(s.run.p99_ms)


def _server_us(s: Any) -> float:
    return float(s.run.server_cpu_s / s.run.responses * 1e6)


def _client_us(s: Any) -> float:
    return float(s.run.client_cpu_s / s.run.responses * 1e6)


def paired(samples: Sequence[Any], variant: str, baseline: str, metric: Callable[[Any], float]) -> list[float]:
    """``metric`` of ``variant`` / ``metric`` of ``baseline`` in each round (same layout, windows seconds apart)."""
    base = {(s.layout, s.round): metric(s) for s in samples if s.variant == baseline}
    return [metric(s) / base[s.layout, s.round] for s in samples if s.variant == variant]


def hb_table(samples: list[HbSample], variants: Sequence[str], baseline: str, header: str) -> list[str]:
    rows = [
        f"| layout | {header} | heartbeats/s (median; min–max) | p50 | p99 | server CPU / request | client CPU / "
        f"request | / {baseline}, median of the rounds' ratios: heartbeats/s, p99, server CPU/req |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for layout in dict.fromkeys(s.layout for s in samples):
        mine = [s for s in samples if s.layout == layout]
        for variant in variants:
            runs = [s for s in mine if s.variant == variant]
            rates = [_rps(s) for s in runs]
            ratio = (
                "–"
                if variant == baseline
                else ", ".join(f"{_median(paired(mine, variant, baseline, m)):.3f}" for m in (_rps, _p99, _server_us))
            )
            rows.append(
                f"| {layout} | {variant} | {_median(rates):,.0f} ({min(rates):,.0f}–{max(rates):,.0f}, "
                f"n={len(runs)}) | "
                f"{_median([s.run.p50_ms for s in runs]):.2f} ms | {_median([_p99(s) for s in runs]):.2f} ms | "
                f"{_median([_server_us(s) for s in runs]):.1f} µs | {_median([_client_us(s) for s in runs]):.1f} µs | "
                f"{ratio} |"
            )
    return rows


def verdicts(samples: list[HbSample], variant: str, baseline: str, target: float) -> list[str]:
    """Per layout: the cost of ``variant`` against ``baseline`` in heartbeats per second and in server CPU per
    heartbeat (medians of the rounds' ratios), each against ``target``."""
    lines = []
    for layout in dict.fromkeys(s.layout for s in samples):
        mine = [s for s in samples if s.layout == layout]
        ratios = paired(mine, variant, baseline, _rps)
        cost = 1 - _median(ratios)
        cpu_cost = _median(paired(mine, variant, baseline, _server_us)) - 1
        lines.append(
            f"{layout}: {variant} / {baseline}: heartbeats/s {_median(ratios):.3f} (rounds: "
            f"{', '.join(f'{r:.2f}' for r in ratios)}), {cost * 100:.1f} % fewer: "
            f"{'met' if cost <= target else 'MISSED'}; server CPU per heartbeat {cpu_cost * 100:+.1f} %: "
            f"{'met' if cpu_cost <= target else 'MISSED'} (target ≤ {target * 100:.0f} %)"
        )
    return lines


def connect_table(runs: list[ConnectRun]) -> list[str]:
    rows = [
        "| variant | connections/s (median; min–max) | p50 | p99 | server CPU / connection | client CPU / connection "
        "| / PLAINTEXT, median of the rounds' ratios: connections/s, server CPU/connection |",
        "|---|---|---|---|---|---|---|",
    ]

    def rate(r: Any) -> float:
        return float(r.per_second)

    def server_ms(r: Any) -> float:
        return float(r.server_cpu_s / r.connections * 1e3)

    for variant in CONNECT_VARIANTS:
        mine = [r for r in runs if r.variant == variant]
        rates = [rate(r) for r in mine]
        ratio = (
            "–"
            if variant == "PLAINTEXT"
            else ", ".join(f"{_median(paired(runs, variant, 'PLAINTEXT', m)):.3f}" for m in (rate, server_ms))
        )
        rows.append(
            f"| {variant} | {_median(rates):,.0f} ({min(rates):,.0f}–{max(rates):,.0f}, n={len(mine)}) | "
            f"{_median([r.p50_ms for r in mine]):.2f} ms | {_median([r.p99_ms for r in mine]):.2f} ms | "
            f"{_median([server_ms(r) for r in mine]):.2f} ms | "
            f"{_median([r.client_cpu_s / r.connections * 1e3 for r in mine]):.2f} ms | {ratio} |"
        )
    return rows


# ---------------------------------------------------------------------------------------------------------------
# main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--parts", default="tls,acl,connect", help="parts to run, comma-separated (default all)")
    parser.add_argument("--rounds", type=int, default=12, help="rounds of part tls (default 12)")
    parser.add_argument("--acl-rounds", type=int, default=16, help="rounds of part acl (default 16)")
    parser.add_argument("--connect-rounds", type=int, default=8, help="rounds of part connect (default 8)")
    parser.add_argument("--members", type=int, default=1_000, help="members of each group (default 1000)")
    parser.add_argument("--hb-seconds", type=float, default=1.0, help="measured heartbeat window (default 1)")
    parser.add_argument("--hb-warmup", type=float, default=0.3, help="heartbeat warm-up not counted (default 0.3)")
    parser.add_argument("--tls-layouts", default="1000:10,100:100", help="part tls: MEMBERS:CONNECTIONS, ...")
    parser.add_argument("--acl-layouts", default="1000:10", help="part acl: MEMBERS:CONNECTIONS, ...")
    parser.add_argument("--acls", type=int, default=10_000, help="ACLs of the '10k' server (default 10000)")
    parser.add_argument("--acl-batch", type=int, default=1_000, help="ACLs per CreateAcls (default 1000)")
    parser.add_argument("--connect-seconds", type=float, default=1.5, help="measured connect window (default 1.5)")
    parser.add_argument("--connect-concurrency", type=int, default=4, help="clients connecting at once (default 4)")
    parser.add_argument(
        "--event-loop", choices=("auto", "uvloop", "asyncio"), default="auto", help="the servers' --event-loop"
    )
    parser.add_argument("--profile", action="store_true", help="also profile PLAINTEXT and SASL_SSL windows")
    parser.add_argument("--profile-layout", default="100:100", help="the profiled heartbeats' MEMBERS:CONNECTIONS")
    parser.add_argument("--profile-top", type=int, default=30, help="functions to print per profile listing")
    parser.add_argument("--profile-out", metavar="PREFIX", help="also keep the cProfile stats in PREFIX.<listener>")
    parser.add_argument("--data-root", help="where the temporary data directories go (default: the system tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the data directories and server logs")
    parser.add_argument("--json", metavar="OUT", help="write machine-readable results to OUT")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    unknown = set(parts) - {"tls", "acl", "connect"}
    if unknown:
        parser.error(f"unknown parts: {sorted(unknown)}")
    for text in (args.tls_layouts, args.acl_layouts):
        if any(m > args.members for m, _ in parse_layouts(text)):
            parser.error("a layout has more members than --members")

    def report(line: str) -> None:
        print(line, flush=True)

    began = time.monotonic()
    facts = sb.machine_facts(args.data_root)
    report("machine: " + ", ".join(f"{k}={v}" for k, v in facts.items()))
    results: dict[str, Any] = {"machine": facts}
    hb_samples: list[HbSample] = []
    connect_runs: list[ConnectRun] = []
    profiles: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="regroup-bench-security-", dir=args.data_root) as tmp:
        keystore_path, ca = keystore(Path(tmp))
        client_tls = ssl.create_default_context(cafile=str(ca))
        scram_users = [(SCRAM, *CAROL)]
        if "tls" in parts or "connect" in parts:
            server = SecureServer(
                security_properties(keystore_path), args.data_root, scram_users, event_loop=args.event_loop
            )
            with running([server], args.keep):
                report(f"server with listeners {server.ports}")
                if "tls" in parts:
                    report("part tls: heartbeats per listener")
                    samples, tls = asyncio.run(run_tls_part(args, server, client_tls, report))
                    hb_samples += samples
                    results["tls"] = tls
                if "connect" in parts:
                    report(f"part connect: {args.connect_concurrency} clients connecting back to back")
                    connect_runs = asyncio.run(run_connect_part(args, server, client_tls, report))
        if "acl" in parts:
            servers = {
                name: SecureServer(acl_properties(name != "none"), args.data_root, event_loop=args.event_loop)
                for name in ACL_VARIANTS
            }
            with running(list(servers.values()), args.keep):
                report("part acl: " + ", ".join(f"{n} on port {s.ports['SASL_PLAINTEXT']}" for n, s in servers.items()))
                samples, acl = asyncio.run(run_acl_part(args, servers, report))
                hb_samples += samples
                results["acl"] = acl
        if args.profile:
            report("profile: the server under cProfile")
            properties = security_properties(keystore_path)
            profiles = run_profiles(args, properties, scram_users, client_tls, Path(tmp), report)
            for name, text in profiles.items():
                report(f"=== {name} ===\n{text}")
    report(f"\nwall time {time.monotonic() - began:.0f} s, load average at the end {os.getloadavg()}")
    tls_samples = [s for s in hb_samples if s.part == "tls"]
    if tls_samples:
        report("\n" + "\n".join(hb_table(tls_samples, TLS_VARIANTS, "PLAINTEXT", "listener")))
        for line in verdicts(tls_samples, "SASL_SSL", "PLAINTEXT", TARGET_TLS_COST):
            report("TLS: " + line)
    acl_samples = [s for s in hb_samples if s.part == "acl"]
    if acl_samples:
        report("\n" + "\n".join(hb_table(acl_samples, ACL_VARIANTS, "none", "authorizer")))
        for line in verdicts(acl_samples, "10k", "none", TARGET_AUTHZ_COST):
            report("ACLs: " + line)
        for line in verdicts(acl_samples, "10k", "needed", TARGET_AUTHZ_COST):
            report("ACLs: " + line)
        decision = results["acl"]["authorize_us"]
        per_hb = _median([_server_us(s) for s in acl_samples if s.variant == "none"])
        report(
            f"ACLs: Authorizer.authorize in-process: {decision['needed']:.2f} µs (needed), {decision['10k']:.2f} µs "
            f"(10k) per decision; {decision['10k'] / per_hb * 100:.1f} % of the server CPU of a heartbeat without "
            f"authorizer ({per_hb:.1f} µs)"
        )
    if connect_runs:
        report("\n" + "\n".join(connect_table(connect_runs)))
    if args.json:
        results["heartbeats"] = [s.row() for s in hb_samples]
        results["connect"] = [asdict(r) for r in connect_runs]
        results["profiles"] = profiles
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
