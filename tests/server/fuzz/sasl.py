"""The fuzzer's SASL mode (``python -m tests.server.fuzz --sasl``): a server with one SASL_PLAINTEXT listener
(PLAIN users in its JAAS config, SCRAM-SHA-256/512 users seeded with ``regroup users add`` before it starts,
Kafka's unsecured OAUTHBEARER tokens, re-authentication every ``REAUTH_MS``), and one script per connection
(``SaslScript``) that runs a realistic exchange with a mutation at each step:

* **handshake**: mechanism names near the enabled ones, empty, huge, not UTF-8, random; versions in and out
  of range; the frame's bytes and length fields mutated;
* **PLAIN**: tokens with a wrong, empty or huge field, missing or extra NULs, an authorization id, not UTF-8;
* **SCRAM**: client-first and client-final messages mutated field by field (GS2 header, user name escapes,
  nonce, extensions, channel binding, proof: wrong, short, not base64; missing or swapped fields, huge fields,
  non-UTF-8), computed by a client written here from RFC 5802 so that the rest of the message stays valid;
* **OAUTHBEARER**: unsecured JWTs with bad parts, bad base64, bad JSON, bad or missing claims, huge ones, and
  initial responses with missing ``\\x01`` separators, other schemes, bad extensions; the client's answer to
  the server's error challenge;
* **raw tokens** after a v0 handshake, with size prefixes that lie, truncated frames, a Kafka request where a
  token belongs;
* requests **out of turn**: other APIs before or during authentication, SaslAuthenticate before the handshake,
  a second handshake, requests pipelined behind a failing token;
* **re-authentication** (KIP-368) after a success: same identity, another one, another mechanism, a v0
  handshake, requests in the middle;
* after a success, often the frame fuzzer's mutated frames (``Mutator``), so the authenticated path is fuzzed
  through a SASL listener too.

Each mutation knows whether it must fail (``FAIL``), must succeed (``OK``) or may do either (``UNKNOWN``); the
script checks the server's answer against it (``protocol`` findings: a wrong password accepted, a valid
exchange refused, a request answered before authentication, a failed exchange whose connection stays open)."""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import json
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.server.conftest import ServerProcess
from tests.server.fuzz.layout import LayoutError, walk
from tests.server.fuzz.mutate import Mutant
from tests.server.fuzz.runner import Options, _decode
from tests.server.fuzz.scripted import Closed, Link, Script, ScriptRun, Stalled, pick
from tests.server.fuzz.seeds import CORRELATION_AT, SIZE, TAG_AT, TAG_CLIENT_ID, TAG_DIGITS, Seed
from tests.server.wire import API_VERSIONS, HEARTBEAT, encode_request
from tests.server_data.batches import uvarint

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
NONE, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 0, 33, 34, 58
UNKNOWN_MEMBER_ID = 25
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
PLAIN_USERS = {"fuzz": "fuzz-pw-1a7c", "other": "other-pw-2b8d", "fuzz-health": "health-pw-3c9e"}
#: SCRAM users (both mechanisms), seeded before the server starts
SCRAM_USERS = {"fuzz-scram": "scram-pw-4d0f", "fuzz-scram2": "scram-pw-5e1a"}
OAUTH_SUBJECTS = ("fuzz-oauth", "other-oauth")
#: the scope every OAUTHBEARER token must have (unsecuredValidatorRequiredScope)
OAUTH_SCOPE = "fuzz"
REAUTH_MS = 3000
#: the largest frame before authentication (the server's SASL_MAX_RECEIVE_BYTES, Kafka's sasl.server.max.receive.size)
SASL_MAX = 524_288
#: a mutation's verdict: the server must accept it, must refuse it, or may do either
OK, FAIL, UNKNOWN = "ok", "fail", "?"
ALG_NULL, JSON_STRING = '{"alg":null}', '"x"'
_NONCE_CHARS = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != ",")


def properties(port: int) -> str:
    plain = " ".join(f'user_{user}="{password}"' for user, password in PLAIN_USERS.items())
    return (
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}\n"
        f"sasl.enabled.mechanisms={','.join(MECHANISMS)}\n"
        "listener.name.sasl_plaintext.plain.sasl.jaas.config="
        f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain};\n"
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'unsecuredValidatorRequiredScope="{OAUTH_SCOPE}";\n'
        f"connections.max.reauth.ms={REAUTH_MS}\n"
    )


def start_server(base: Path, options: Options) -> ServerProcess:
    """``regroup serve`` on a SASL_PLAINTEXT listener, its SCRAM users added first."""
    data = base / "data"
    for mechanism in SCRAM_HASHES:
        for user, password in SCRAM_USERS.items():
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "regroup",
                    "users",
                    "add",
                    "--data-dir",
                    str(data),
                    "--mechanism",
                    mechanism,
                    "--user",
                    user,
                    "--password",
                    password,
                ],
                check=True,
                capture_output=True,
            )
    server = ServerProcess(data, base / "server.log", [])
    config = base / "server.properties"
    config.write_text(properties(server.port))
    server.extra_args = ["--config", str(config), *options.server_args]
    server.start()
    return server


# ---------------------------------------------------------------------------------- frames
def request_header(api_key: int, version: int, correlation_id: int, client_id: bytes | None, flexible: bool) -> bytes:
    name = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return struct.pack(">hhi", api_key, version, correlation_id) + name + (b"\x00" if flexible else b"")


def api_versions(version: int, correlation_id: int, client_id: str | None) -> bytes:
    software = {"client_software_name": "fuzz", "client_software_version": "1"} if version >= 3 else {}
    return encode_request(API_VERSIONS, version, correlation_id, client_id, **software)


def framed(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload


def handshake_frame(version: int, correlation_id: int, mechanism: bytes, client_id: bytes | None) -> bytes:
    mechanism = mechanism[:32767]
    header = request_header(SASL_HANDSHAKE, version, correlation_id, client_id, False)
    return framed(header + struct.pack(">h", len(mechanism)) + mechanism)


def authenticate_frame(version: int, correlation_id: int, token: bytes, client_id: bytes | None) -> bytes:
    flexible = version >= 2
    body = uvarint(len(token) + 1) + token + b"\x00" if flexible else struct.pack(">i", len(token)) + token
    return framed(request_header(SASL_AUTHENTICATE, version, correlation_id, client_id, flexible) + body)


def seed_of(frame: bytes, api_key: int, version: int) -> Seed:
    """``frame`` as a seed of the mutator, with its length fields when its layout can be read."""
    from kio.index import load_request_schema

    try:
        cls = load_request_schema(api_key, version)
        header_sites, used = walk(cls.__header_schema__, frame, SIZE.size, header=True)
        body_sites, _ = walk(cls, frame, used)
        sites = (*header_sites, *body_sites)
    except (LayoutError, ValueError, KeyError, ModuleNotFoundError, AttributeError):
        sites = ()
    return Seed(api_key, version, frame, tuple(sites))


# ---------------------------------------------------------------------------------- SCRAM (RFC 5802)
@functools.lru_cache(maxsize=64)
def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)


def escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


@dataclass(frozen=True)
class ServerFirst:
    text: str
    nonce: str
    salt: bytes
    iterations: int


def parse_server_first(data: bytes) -> ServerFirst:
    text = data.decode("ascii")
    fields = dict(part.split("=", 1) for part in text.split(","))
    return ServerFirst(text, fields["r"], base64.b64decode(fields["s"], validate=True), int(fields["i"]))


def scram_final(
    hash_name: str,
    password: str,
    gs2: str,
    bare: str,
    first: ServerFirst,
    *,
    binding: str | None = None,
    nonce: str | None = None,
    extensions: str = "",
) -> tuple[str, bytes, bytes]:
    """The client-final message without its proof, the proof, and the server signature to expect."""
    salted = salted_password(hash_name, password, first.salt, first.iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    channel = base64.b64encode(gs2.encode()).decode() if binding is None else binding
    without_proof = f"c={channel},r={first.nonce if nonce is None else nonce}{extensions}"
    auth = f"{bare},{first.text},{without_proof}".encode()
    signature = hmac.new(stored_key, auth, hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    return without_proof, proof, hmac.new(server_key, auth, hash_name).digest()


def split_client_first(message: bytes) -> tuple[str, str, str]:
    """The GS2 header, the bare message and the client nonce of a client-first message, as the server reads them
    (for a message it accepts)."""
    text = message.decode("utf-8", "replace")
    flag, authzid, bare = [*text.split(",", 2), "", ""][:3]
    nonce = bare.split("r=", 1)[1].split(",", 1)[0] if "r=" in bare else ""
    return f"{flag},{authzid},", bare, nonce


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def b64url(data: bytes | str | dict[str, Any]) -> str:
    raw = data if isinstance(data, bytes) else (data if isinstance(data, str) else json.dumps(data)).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


# ---------------------------------------------------------------------------------- health
async def health_check(port: int, count: int) -> bool:
    """An authenticated client is served: ApiVersions, an exchange (PLAIN, every other time SCRAM-SHA-512),
    then a Heartbeat for an unknown group answered UNKNOWN_MEMBER_ID."""
    link = Link(*await asyncio.open_connection("127.0.0.1", port))
    correlation_id = 0

    async def call(api_key: int, version: int, frame: bytes) -> Any:
        link.write(frame)
        return _decode(api_key, version, correlation_id, await link.read_frame(30))

    try:
        correlation_id += 1
        if (await call(API_VERSIONS, 2, encode_request(API_VERSIONS, 2, correlation_id, "fuzz-health"))).error_code:
            return False
        mechanism = "SCRAM-SHA-512" if count % 2 else "PLAIN"
        correlation_id += 1
        if (await call(SASL_HANDSHAKE, 1, handshake_frame(1, correlation_id, mechanism.encode(), None))).error_code:
            return False
        if mechanism == "PLAIN":
            token = b"\0fuzz-health\0" + PLAIN_USERS["fuzz-health"].encode()
        else:
            bare = f"n=fuzz-scram,r=health{count}"
            correlation_id += 1
            answer = await call(
                SASL_AUTHENTICATE, 2, authenticate_frame(2, correlation_id, f"n,,{bare}".encode(), None)
            )
            if answer.error_code:
                return False
            first = parse_server_first(answer.auth_bytes)
            without, proof, _ = scram_final("sha512", SCRAM_USERS["fuzz-scram"], "n,,", bare, first)
            token = f"{without},p={b64(proof)}".encode()
        correlation_id += 1
        if (await call(SASL_AUTHENTICATE, 2, authenticate_frame(2, correlation_id, token, None))).error_code:
            return False
        correlation_id += 1
        heartbeat = dict(group_id="fuzz-health-nobody", generation_id=1, member_id="m")
        answer = await call(HEARTBEAT, 4, encode_request(HEARTBEAT, 4, correlation_id, "fuzz-health", **heartbeat))
        return bool(answer.error_code == UNKNOWN_MEMBER_ID)
    except (Closed, Stalled, ValueError, KeyError, struct.error):  # (an answer it cannot read: not healthy)
        return False
    finally:
        link.close()


# ---------------------------------------------------------------------------------- the script
@dataclass(frozen=True)
class Step:
    """An exchange step's answer: error code and the server's bytes; ``known`` False when the frame was mutated
    past reading its answer."""

    error: int
    data: bytes = b""
    known: bool = True


def combine(*verdicts: str) -> str:
    if FAIL in verdicts:
        return FAIL
    return UNKNOWN if UNKNOWN in verdicts else OK


class SaslScript(Script):
    PLANS = (
        (6, "pre-auth"),
        (6, "handshake"),
        (8, "plain"),
        (10, "scram"),
        (8, "oauth"),
        (6, "raw"),
        (4, "reauth"),
        (4, "pipelined"),
        (1, "expiry"),  # (holds its connection for a second)
    )

    def __init__(self, fuzz: ScriptRun, index: int) -> None:
        super().__init__(fuzz, index)
        self.raw_mode = False
        self.authenticated = False
        self.mechanism = ""
        #: the version of each SaslAuthenticate sent, by correlation id (to read its answer)
        self.token_versions: dict[int, int] = {}
        #: the last token's frame was over the limit before authentication: the server must close
        self.oversize = False
        #: the last SaslAuthenticate was mutated (its outcome is anyone's guess)
        self.garbled = False

    # ------------------------------------------------------------------------------ plans
    async def plan_pre_auth(self) -> None:
        """Requests out of turn before (or during) authentication: never answered, the connection closed."""
        await self.connect()
        if not await self.maybe_api_versions():
            return
        kind = self.rng.choice(
            (
                "request",
                "authenticate",
                "after-handshake",
                "api-versions-after-handshake",
                "handshake-twice",
                "mutated",
                "mutated",
                "pipelined",
            )
        )
        self.outcomes[f"pre-auth {kind}"] += 1
        if kind == "mutated":
            for _ in range(self.rng.choice((1, 4, 16))):
                mutant = self.mutator.next(self.next_correlation(), self.index)
                key = _claimed_key(mutant.frame)
                self.send_mutant(mutant, forbidden=key is not None and key not in (SASL_HANDSHAKE, API_VERSIONS, 36))
                if self.ended:
                    break
            await self.expect_any()
            return
        if kind == "request":
            self.send_mutant(self.corpus_frame(), forbidden=True)
            await self.expect_close("a request before authentication")
            return
        if kind == "authenticate":
            self.token_frame(
                b"\0fuzz\0" + PLAIN_USERS["fuzz"].encode(), "SaslAuthenticate before a handshake", forbidden=True
            )
            await self.expect_close("a SaslAuthenticate before the handshake")
            return
        mechanism = self.rng.choice(MECHANISMS)
        if kind == "pipelined":  # the handshake, a request out of turn and a valid token in one write
            self.send(
                handshake_frame(1, self.next_correlation(), mechanism.encode(), self.client_id),
                SASL_HANDSHAKE,
                1,
                f"SaslHandshake v1 {mechanism}",
            )
            self.send_mutant(self.corpus_frame(), forbidden=True)
            self.token_frame(b"\0fuzz\0" + PLAIN_USERS["fuzz"].encode(), "PLAIN token behind it", forbidden=True)
            await self.expect_close("a request between SaslHandshake and SaslAuthenticate")
            return
        if await self.handshake(mechanism, 1) != NONE:
            return
        if kind == "after-handshake":
            self.send_mutant(self.corpus_frame(), forbidden=True)
        elif kind == "api-versions-after-handshake":
            correlation_id = self.next_correlation()
            frame = api_versions(self.rng.randint(0, 3), correlation_id, self.client_id.decode())
            self.send(frame, API_VERSIONS, 0, "ApiVersions during authentication", forbidden=True)
        else:
            correlation_id = self.next_correlation()
            frame = handshake_frame(1, correlation_id, mechanism.encode(), self.client_id)
            self.send(frame, SASL_HANDSHAKE, 1, "a second SaslHandshake", forbidden=True)
        await self.expect_close(f"{kind} (out of turn)")

    async def plan_handshake(self) -> None:
        """SaslHandshake with mechanism names and versions mutated; an enabled mechanism goes on with its
        (possibly mutated) exchange."""
        await self.connect()
        if not await self.maybe_api_versions():
            return
        rng = self.rng
        name, verdict = pick(
            rng,
            [
                (8, (rng.choice(MECHANISMS).encode(), OK)),
                (1, (b"", FAIL)),
                (1, (b"plain", FAIL)),
                (1, (b"PLAIN ", FAIL)),
                (1, (b" PLAIN", FAIL)),
                (1, (b"PLAIN\x00", FAIL)),
                (1, (b"GSSAPI", FAIL)),
                (1, (b"SCRAM-SHA-1", FAIL)),
                (1, (b"SCRAM-SHA-256\xff", FAIL)),
                (1, (b"\xff\xfe\xfd", FAIL)),
                (1, ("PLA\u0130N".encode(), FAIL)),
                (1, (b"x" * 32767, FAIL)),
                (1, (b"OAUTHBEARER" * 2000, FAIL)),
                (1, (rng.randbytes(rng.randint(1, 64)), FAIL)),
                (1, (b"SCRAM-SHA-512\n", FAIL)),
                (1, (b"oauthbearer", FAIL)),
                (1, (b"SCRAM-SHA-256,PLAIN", FAIL)),
            ],
        )
        version = pick(rng, [(6, 1), (3, 0), (1, rng.choice((2, 3, -1, 32767, -32768)))])
        garble = rng.random() < 0.15
        code = await self.handshake(name, version, garble=garble)
        if code is None or code < 0:
            await self.expect_any()
            return
        if code == NONE and verdict == FAIL:
            self.protocol("a SaslHandshake for a mechanism not enabled was accepted", repr(name[:64]))
        elif code != NONE and verdict == OK:
            self.protocol("a SaslHandshake for an enabled mechanism was refused", f"{name!r} v{version}: {code}")
        if code != NONE:
            if rng.random() < 0.3:
                self.send_mutant(self.corpus_frame(), forbidden=True)
            await self.expect_close("after a refused SaslHandshake")
            return
        self.mechanism = name.decode()
        self.raw_mode = version == 0
        if await self.mechanism_exchange(mutate=rng.random() < 0.7) == OK:
            await self.after_success()

    async def plan_plain(self) -> None:
        await self.run_mechanism("PLAIN")

    async def plan_scram(self) -> None:
        await self.run_mechanism(self.rng.choice(("SCRAM-SHA-256", "SCRAM-SHA-512")))

    async def plan_oauth(self) -> None:
        await self.run_mechanism("OAUTHBEARER")

    async def run_mechanism(self, mechanism: str) -> None:
        await self.connect()
        if not await self.maybe_api_versions():
            return
        version = pick(self.rng, [(3, 1), (1, 0)])
        outcome = await self.exchange(mechanism, version, mutate=self.rng.random() < 0.75)
        if outcome == OK:
            await self.after_success()

    async def plan_raw(self) -> None:
        """A v0 handshake, then raw tokens whose framing lies."""
        await self.connect()
        rng = self.rng
        mechanism = rng.choice(MECHANISMS)
        if await self.handshake(mechanism, 0) != NONE:
            return
        self.mechanism, self.raw_mode = mechanism, True
        token = self.valid_first_token(mechanism)
        kind = rng.choice(
            (
                "longer",
                "shorter",
                "negative",
                "over-limit",
                "half-prefix",
                "empty",
                "request",
                "two-tokens",
                "truncated",
                "trickled",
                "exchange",
                "exchange",
            )
        )
        self.outcomes[f"raw {kind}"] += 1
        link = self.link
        assert link is not None
        closes = True  # the server must close the connection
        if kind == "exchange":
            if await self.mechanism_exchange(mutate=rng.random() < 0.5) == OK:
                await self.after_success()
            return
        if kind == "longer":
            self.raw(SIZE.pack(len(token) + rng.randint(1, 5000)) + token, "size prefix longer than the token")
            link.write_eof()
        elif kind == "shorter":
            cut = rng.randint(0, max(len(token) - 1, 0))
            self.raw(SIZE.pack(cut) + token, f"size prefix {cut} of a {len(token)}-byte token")
            closes = False  # what follows the short token is read as another frame: anything may happen
        elif kind == "negative":
            self.raw(SIZE.pack(rng.choice((-1, -2, -(2**31)))) + token, "negative size prefix")
        elif kind == "over-limit":
            size = rng.choice((SASL_MAX + 1, 2**24, 2**31 - 1))
            self.raw(SIZE.pack(size) + token, f"size prefix {size} over the limit before authentication")
        elif kind == "half-prefix":
            self.raw(SIZE.pack(len(token))[: rng.randint(1, 3)], "half a size prefix")
            link.write_eof()
        elif kind == "empty":
            self.raw(SIZE.pack(0), "an empty token")
        elif kind == "request":
            frame = api_versions(rng.randint(0, 3), self.next_correlation(), "fuzz")
            self.raw(frame, "a Kafka request where a token belongs")
        elif kind == "two-tokens":
            self.raw(framed(token) + framed(token), "the token twice in one write")
            closes = False
        elif kind == "truncated":
            whole = framed(token)
            self.raw(whole[: rng.randint(1, len(whole) - 1)], "a truncated token, then the connection closed")
            return
        else:  # trickled: byte by byte, then it must go on like a token sent at once
            whole = framed(token)
            self.sent.append(Mutant(whole, -1, -1, f"{self.plan}: a token written byte by byte"))
            self.fuzz.frames_sent += 1
            for byte in whole[:64]:
                link.write(bytes([byte]))
                await link.drain()
            link.write(whole[64:])
            closes = False
        if closes:
            await self.expect_close(f"raw token: {kind}")
        else:
            await self.raw_reply()

    async def plan_reauth(self) -> None:
        """A valid exchange, then re-authentications (KIP-368), valid or not, with requests between."""
        await self.connect()
        rng = self.rng
        mechanism = rng.choice(MECHANISMS)
        if await self.exchange(mechanism, 1, mutate=False) != OK:
            return
        for _ in range(rng.randint(1, 3)):
            if not await self.requests(rng.randint(0, 3)):
                return
            kind = rng.choice(
                (
                    "same",
                    "same",
                    "mutated",
                    "other-identity",
                    "other-mechanism",
                    "v0",
                    "request-between",
                    "unknown-mechanism",
                )
            )
            self.outcomes[f"reauth {kind}"] += 1
            if kind in ("same", "mutated", "other-identity"):
                outcome = await self.exchange(
                    mechanism, 1, mutate=kind == "mutated", other=kind == "other-identity", reauth=True
                )
                if outcome != OK:
                    return
                continue
            if kind == "v0":
                code = await self.handshake(mechanism, 0)
                if code is not None and code != ILLEGAL_SASL_STATE:
                    self.protocol("a SaslHandshake v0 on an authenticated connection was not refused", f"{code}")
                await self.expect_close("a v0 re-authentication")
                return
            if kind == "request-between":
                if await self.handshake(mechanism, 1) != NONE:
                    return
                self.send_mutant(self.valid_request(), forbidden=True)
                await self.expect_close("a request between re-authentication steps")
                return
            other = "GSSAPI" if kind == "unknown-mechanism" else rng.choice([m for m in MECHANISMS if m != mechanism])
            await self.handshake(other, 1)
            if self.ended:
                return
            token = self.valid_first_token(other)
            step = await self.step(token, f"a {other} token re-authenticating a {mechanism} session")
            self.judge(FAIL, self.outcome_of(step), f"re-authentication with {other} after {mechanism}")
            if not self.ended:
                await self.expect_close("a re-authentication with another mechanism")
            return
        await self.after_success()

    async def plan_expiry(self) -> None:
        """A session that lapses (KIP-368): an OAUTHBEARER token valid for half a second, then either a request
        (never answered: the connection closes) or a re-authentication, allowed after the lapse."""
        await self.connect()
        if await self.handshake("OAUTHBEARER", 1) != NONE:
            return
        self.mechanism = "OAUTHBEARER"
        claims = valid_claims(time.time()) | {"exp": time.time() + 0.5}
        if await self.last_step(initial_response(self.oauth_token(claims)), "valid for 0.5 s", OK) != OK:
            return
        await asyncio.sleep(0.7)
        if self.rng.random() < 0.5:
            self.send_mutant(self.valid_request(), forbidden=True)
            await self.expect_close("a request after the session lapsed")
            return
        if await self.exchange("OAUTHBEARER", 1, mutate=False, reauth=True) != OK:
            return
        if not await self.requests(2) and self.ended and not self.reset:
            self.protocol("a connection re-authenticated after its session lapsed was closed", "")

    async def plan_pipelined(self) -> None:
        """The whole exchange in one write (PLAIN or OAUTHBEARER) followed by requests: all answered when the
        token is valid, none (and the connection closed) when it is not."""
        await self.connect()
        rng = self.rng
        mechanism = rng.choice(("PLAIN", "PLAIN", "OAUTHBEARER"))
        self.mechanism = mechanism
        version = pick(rng, [(3, 1), (1, 0)])
        self.raw_mode = version == 0
        valid = rng.random() < 0.6
        if valid:
            token, how, verdict = self.valid_first_token(mechanism), "valid", OK
        elif mechanism == "PLAIN":
            token, how, verdict = b"\0fuzz\0wrong-" + PLAIN_USERS["fuzz"].encode(), "wrong password", FAIL
        else:
            token, how, verdict = (
                initial_response(self.oauth_token(valid_claims(time.time()) | {"exp": 1})),
                "expired",
                FAIL,
            )
        handshake_id = self.next_correlation()
        self.send(
            handshake_frame(version, handshake_id, mechanism.encode(), self.client_id),
            SASL_HANDSHAKE,
            version,
            f"SaslHandshake v{version} {mechanism}",
        )
        token_id = 0
        if self.raw_mode:
            self.raw(framed(token), f"raw {mechanism} token: {how}")
        else:
            token_id = self.token_frame(token, f"{mechanism} token: {how}") or 0
        requests = [self.valid_request() for _ in range(rng.randint(1, 6))]
        for request in requests:
            self.send_mutant(request, forbidden=verdict == FAIL)
        if await self.answer(handshake_id) is None:
            if self.ended and not self.reset:
                self.protocol("a pipelined SaslHandshake was not answered", f"{mechanism}: {self.close_reason}")
            return
        if self.raw_mode:
            reply = await self.raw_reply()
            outcome = OK if reply == b"" else (FAIL if reply is None and self.ended else UNKNOWN)
            if mechanism == "OAUTHBEARER" and reply:
                outcome = FAIL  # an error challenge; its acknowledgement (the next frame) fails the exchange
        else:
            answer = await self.answer(token_id)
            step = None if answer is None else self.read_authenticate(token_id, answer)
            outcome = self.outcome_of(step)
            if outcome == OK and step is not None and step.data:
                outcome = FAIL  # (OAUTHBEARER's error challenge)
        self.judge(verdict, outcome, f"pipelined {mechanism} {how}")
        if outcome != OK:
            await self.expect_close("a failed pipelined exchange")
            return
        for request in requests:
            correlation_id = struct.unpack_from(">i", request.frame, CORRELATION_AT)[0]
            if await self.answer(correlation_id) is None:
                if self.ended and not self.reset:
                    self.protocol("requests pipelined behind a valid authentication were not answered", mechanism)
                return
        await self.after_success()

    # ------------------------------------------------------------------------------ exchanges
    async def exchange(
        self, mechanism: str, version: int, *, mutate: bool, other: bool = False, reauth: bool = False
    ) -> str:
        """SaslHandshake ``version`` for ``mechanism`` and its exchange; the outcome (OK, FAIL, UNKNOWN)."""
        code = await self.handshake(mechanism, version)
        if code != NONE:
            if code is not None and code > 0 and not reauth:
                self.protocol("a SaslHandshake for an enabled mechanism was refused", f"{mechanism}: {code}")
            return FAIL if code is not None and code > 0 else UNKNOWN
        self.mechanism = mechanism
        self.raw_mode = version == 0
        return await self.mechanism_exchange(mutate=mutate, other=other, reauth=reauth)

    async def mechanism_exchange(self, *, mutate: bool, other: bool = False, reauth: bool = False) -> str:
        mechanism = self.mechanism
        if mechanism == "PLAIN":
            token, how, verdict = self.plain_token("other" if other else "fuzz", mutate)
            if other and reauth:
                verdict = FAIL
            return await self.last_step(token, how, verdict)
        if mechanism in SCRAM_HASHES:
            return await self.scram_exchange(mutate=mutate, other=other, reauth=reauth)
        return await self.oauth_exchange(mutate=mutate, other=other, reauth=reauth)

    async def last_step(self, token: bytes, how: str, verdict: str) -> str:
        """The exchange's last token: the outcome judged against ``verdict``; a failure must close."""
        step = await self.step(token, how, behind=verdict == FAIL and self.rng.random() < 0.2)
        outcome = self.outcome_of(step)
        if outcome == OK and self.mechanism == "OAUTHBEARER" and step is not None and step.data:
            return await self.oauth_challenged(how, verdict)
        self.judge(verdict, outcome, f"{self.mechanism}: {how}")
        await self.closes_if(outcome)
        return outcome

    async def scram_exchange(self, *, mutate: bool, other: bool, reauth: bool) -> str:
        rng = self.rng
        user = "fuzz-scram2" if other else "fuzz-scram"
        first, how, first_verdict, impostor = self.scram_first(user, mutate and rng.random() < 0.5)
        step = await self.step(first, how)
        outcome = self.outcome_of(step)
        if outcome != OK or step is None:
            self.judge(first_verdict, outcome, f"{self.mechanism} client-first: {how}")
            await self.closes_if(outcome)
            return outcome
        if first_verdict == FAIL:
            self.protocol("a SCRAM client-first message that must fail was answered with a challenge", how)
        try:
            server_first = parse_server_first(step.data)
            if server_first.iterations > 100_000:
                raise ValueError(f"{server_first.iterations} iterations")
        except (ValueError, KeyError, UnicodeDecodeError) as exc:
            self.protocol("an unreadable SCRAM server-first message", f"{exc}: {step.data[:200]!r}")
            return UNKNOWN
        gs2, bare, nonce = split_client_first(first)
        if nonce and first_verdict != UNKNOWN and not server_first.nonce.startswith(nonce):
            self.protocol(
                "the SCRAM server nonce does not extend the client's", f"{nonce[:40]} / {server_first.nonce[:80]}"
            )
        final, final_how, final_verdict, signature = self.scram_final_message(
            SCRAM_USERS[user], impostor, gs2, bare, server_first, mutate and rng.random() < 0.7
        )
        verdict = combine(first_verdict, final_verdict)
        if other and reauth:
            verdict = FAIL
        step = await self.step(final, final_how, behind=verdict == FAIL and rng.random() < 0.2)
        outcome = self.outcome_of(step)
        self.judge(verdict, outcome, f"{self.mechanism}: {how} / {final_how}")
        await self.closes_if(outcome)
        expected = None if signature is None or verdict != OK else b"v=" + base64.b64encode(signature)
        if outcome == OK and step is not None and expected is not None and step.data != expected:
            self.protocol("a wrong SCRAM server signature", f"{step.data[:200]!r}")
        if outcome == OK and rng.random() < 0.1 and not self.raw_mode:  # a token after the exchange ended
            step = await self.step(final, "a SaslAuthenticate after the exchange completed")
            self.judge(FAIL, self.outcome_of(step), "a SaslAuthenticate after the exchange completed")
            if not self.ended:
                await self.expect_close("a SaslAuthenticate out of turn")
            return FAIL
        return outcome

    async def oauth_exchange(self, *, mutate: bool, other: bool, reauth: bool) -> str:
        subject = OAUTH_SUBJECTS[1] if other else OAUTH_SUBJECTS[0]
        token, how, verdict = self.oauth_initial(subject, mutate)
        if reauth and (other or "another subject" in how):
            verdict = FAIL  # (a re-authentication must keep the principal)
        return await self.last_step(token, how, verdict)

    async def oauth_challenged(self, how: str, verdict: str) -> str:
        """The server answered the token with an error challenge: the exchange must fail, whatever follows."""
        self.judge(verdict, FAIL, f"OAUTHBEARER: {how} (challenged)")
        rng = self.rng
        reply = pick(rng, [(6, b"\x01"), (1, b""), (1, b"\x01\x01"), (1, self.valid_first_token("OAUTHBEARER"))])
        if rng.random() < 0.15 and not self.raw_mode:
            self.send_mutant(self.valid_request(), forbidden=True)
            await self.expect_close("a request instead of the challenge's acknowledgement")
            return FAIL
        step = await self.step(reply, f"acknowledgement {reply[:8]!r} of an error challenge")
        outcome = self.outcome_of(step)
        self.judge(FAIL, outcome, "OAUTHBEARER: the acknowledgement of an error challenge")
        await self.closes_if(outcome)
        return FAIL

    async def after_success(self) -> None:
        """After a successful exchange: sometimes the frame fuzzer's frames on the authenticated connection."""
        self.authenticated = True
        self.outcomes["authenticated"] += 1
        if self.ended or self.rng.random() < 0.4:
            return
        await self.mutated_frames(self.rng.choice((4, 8, 16, 32, 64, 128)))

    # ------------------------------------------------------------------------------ steps
    async def maybe_api_versions(self) -> bool:
        """Sometimes ApiVersions first (valid, or a mutated one): allowed before authentication."""
        rng = self.rng
        if rng.random() < 0.6:
            return True
        correlation_id = self.next_correlation()
        if rng.random() < 0.7:
            version = rng.randint(0, 3)
            frame = api_versions(version, correlation_id, self.client_id.decode())
            self.send(frame, API_VERSIONS, version, f"ApiVersions v{version}")
            return await self.answer(correlation_id) is not None
        seed = rng.choice(self.fuzz.seeds_of(API_VERSIONS))
        frame, how = self.garble(self.with_ids(seed.frame, correlation_id), API_VERSIONS, seed.version)
        self.send(frame, API_VERSIONS, seed.version, f"ApiVersions {how}")
        return await self.sentinel()

    async def handshake(self, mechanism: str | bytes, version: int, *, garble: bool = False) -> int | None:
        """SaslHandshake: its error code, None when the connection ended or stalled, -1 when unreadable."""
        name = mechanism.encode() if isinstance(mechanism, str) else mechanism
        correlation_id = self.next_correlation()
        frame = handshake_frame(version, correlation_id, name, self.client_id)
        how = f"SaslHandshake v{version} {name[:40]!r}"
        if garble:
            frame, mutation = self.garble(frame, SASL_HANDSHAKE, max(0, min(version, 1)))
            how += f" {mutation}"
        sent = self.send(frame, SASL_HANDSHAKE, version, how)
        if sent is None:
            await self.expect_any()
            return None if self.ended else -1
        answer = await self.answer(sent)
        if answer is None:
            return None
        if garble or version not in (0, 1):
            return -1
        body = self.decode(SASL_HANDSHAKE, version, correlation_id, answer)
        if body is None:
            return -1
        if sorted(body.mechanisms) != sorted(MECHANISMS):
            self.protocol("SaslHandshake lists other mechanisms than those enabled", repr(body.mechanisms))
        return int(body.error_code)

    def token_frame(self, token: bytes, how: str, *, forbidden: bool = False, garble: float = 0.0) -> int | None:
        """A SaslAuthenticate carrying ``token`` (any version); the correlation id of its answer (None: mutated
        too short to have one)."""
        rng = self.rng
        version = rng.choice((0, 1, 2, 2))
        correlation_id = self.next_correlation()
        frame = authenticate_frame(version, correlation_id, token, self.client_id)
        known = True
        if rng.random() < garble:
            frame, mutation = self.garble(frame, SASL_AUTHENTICATE, version)
            how, known = f"{how} {mutation}", False
        self.oversize = len(frame) - SIZE.size > SASL_MAX
        self.garbled = not known
        sent = self.send(frame, SASL_AUTHENTICATE, version, f"SaslAuthenticate v{version}: {how}", forbidden=forbidden)
        if sent is not None:
            self.token_versions[sent] = version if known else -1
        return sent

    async def step(self, token: bytes, how: str, *, behind: bool = False) -> Step | None:
        """One token, in a SaslAuthenticate or raw; ``behind``: a request follows it at once (it must not be
        answered: the token fails). None when the connection ended (raw: how a failure shows) or stalled."""
        if self.raw_mode:
            self.oversize = len(token) > SASL_MAX
            self.raw(framed(token), f"raw token: {how}")
            reply = await self.raw_reply()
            return None if reply is None else Step(NONE, reply)
        correlation_id = self.token_frame(token, how, garble=0.05)
        if behind:
            self.send_mutant(self.valid_request(), forbidden=True)
        answer = None if correlation_id is None else await self.answer(correlation_id)
        if self.garbled:  # (whatever the answer, the exchange's outcome says nothing)
            await self.expect_any()
            return Step(-1, b"", known=False)
        if answer is None or correlation_id is None:
            return None
        return self.read_authenticate(correlation_id, answer)

    def read_authenticate(self, correlation_id: int, answer: bytes) -> Step | None:
        version = self.token_versions.get(correlation_id, -1)
        if version < 0:
            return Step(-1, b"", known=False)
        body = self.decode(SASL_AUTHENTICATE, version, correlation_id, answer)
        if body is None:
            return Step(-1, b"", known=False)
        return Step(int(body.error_code), bytes(body.auth_bytes))

    def outcome_of(self, step: Step | None) -> str:
        if step is None:
            return FAIL if self.ended else UNKNOWN
        if not step.known:
            return UNKNOWN
        return OK if step.error == NONE else FAIL

    async def closes_if(self, outcome: str) -> None:
        """After a failed exchange step the server closes the connection."""
        if outcome == FAIL and not self.ended:
            await self.expect_close(f"after a failed {self.mechanism} authentication")

    def judge(self, verdict: str, outcome: str, how: str) -> None:
        if self.oversize:
            verdict = FAIL  # (a frame over the limit before authentication closes the connection)
        if verdict == FAIL and outcome == OK:
            self.protocol("an exchange that must fail was accepted", how)
        elif verdict == OK and outcome == FAIL:
            self.protocol("a valid exchange was refused", how)
        self.outcomes[f"auth {outcome}"] += 1

    def raw(self, data: bytes, how: str) -> None:
        self.send(data, -1, -1, how, answered=False)

    async def requests(self, count: int) -> bool:
        for _ in range(count):
            request = self.valid_request()
            self.send_mutant(request)
            if await self.answer(struct.unpack_from(">i", request.frame, CORRELATION_AT)[0]) is None:
                return False
        return True

    # ------------------------------------------------------------------------------ frames and tokens
    def with_ids(self, frame: bytes, correlation_id: int) -> bytes:
        data = bytearray(frame)
        struct.pack_into(">i", data, CORRELATION_AT, correlation_id)
        if data[CORRELATION_AT + 4 : CORRELATION_AT + 6] == struct.pack(">h", len(TAG_CLIENT_ID)):
            data[TAG_AT : TAG_AT + TAG_DIGITS] = b"%08x" % self.index
        return bytes(data)

    def valid_request(self) -> Mutant:
        """A request every authenticated client is answered: Metadata (no topics) or ApiVersions."""
        correlation_id = self.next_correlation()
        client_id = self.client_id.decode()
        if self.rng.random() < 0.5:
            frame = encode_request(
                METADATA,
                9,
                correlation_id,
                client_id,
                topics=[],
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )
            return Mutant(frame, METADATA, 9, "Metadata v9")
        return Mutant(encode_request(API_VERSIONS, 2, correlation_id, client_id), API_VERSIONS, 2, "ApiVersions v2")

    def garble(self, frame: bytes, api_key: int, version: int) -> tuple[bytes, str]:
        """One or two of the frame fuzzer's byte, length-field and header mutations of ``frame``."""
        seed = seed_of(frame, api_key, version)
        data = bytearray(frame)
        m = self.mutator
        mutations = (m.bit_flip, m.overwrite, m.truncate, m.extend, m.length, m.length, m.header)
        hows = [self.rng.choice(mutations)(seed, data)]
        if self.rng.random() < 0.3 and len(data) > CORRELATION_AT:
            hows.append(self.rng.choice(mutations)(seed, data))
        SIZE.pack_into(data, 0, len(data) - SIZE.size)
        return bytes(data), "+".join(hows)

    def decode(self, api_key: int, version: int, correlation_id: int, frame: bytes) -> Any | None:
        try:
            return _decode(api_key, version, correlation_id, frame)
        except Exception as exc:  # (any way kio fails to read it)
            self.protocol(f"an unreadable answer to {api_key}v{version}", f"{type(exc).__name__}: {frame[:200].hex()}")
            return None

    def valid_first_token(self, mechanism: str) -> bytes:
        if mechanism == "PLAIN":
            return b"\0fuzz\0" + PLAIN_USERS["fuzz"].encode()
        if mechanism == "OAUTHBEARER":
            return initial_response(self.oauth_token(valid_claims(time.time())))
        return f"n,,n=fuzz-scram,r={self.nonce()}".encode()

    def nonce(self, size: int = 24) -> str:
        return "".join(self.rng.choice(_NONCE_CHARS) for _ in range(size))

    def huge(self) -> int:
        return self.rng.choice((1000, 65_536, 400_000))

    def plain_token(self, user: str, mutate: bool) -> tuple[bytes, str, str]:
        rng = self.rng
        name, password = user.encode(), PLAIN_USERS[user].encode()
        valid = b"\0" + name + b"\0" + password
        if not mutate:
            return (name + valid, "valid with an authorization id", OK) if rng.random() < 0.2 else (valid, "valid", OK)
        other = PLAIN_USERS["other" if user != "other" else "fuzz"].encode()
        n = self.huge()
        cases: list[tuple[int, Callable[[], tuple[bytes, str, str]]]] = [
            (3, lambda: (valid, "valid", OK)),
            (1, lambda: (name + valid, "authorization id = user", OK)),
            (2, lambda: (b"\0" + name + b"\0" + password[:-1] + b"x", "wrong password", FAIL)),
            (1, lambda: (b"\0" + name + b"\0" + other, "another user's password", FAIL)),
            (1, lambda: (b"\0nobody\0" + password, "unknown user", FAIL)),
            (1, lambda: (b"\0\0" + password, "empty user", FAIL)),
            (1, lambda: (b"\0" + name + b"\0", "empty password", FAIL)),
            (1, lambda: (b"nobody" + valid, "authorization id of another user", FAIL)),
            (1, lambda: (name + b"\0" + password, "two fields", FAIL)),
            (1, lambda: (valid + b"\0x", "four fields", FAIL)),
            (1, lambda: (name + password, "no separator", FAIL)),
            (1, lambda: (b"", "empty token", FAIL)),
            (1, lambda: (valid + b"\xff", "not UTF-8", FAIL)),
            (1, lambda: (b"\0" + name + b"\xc3\0" + password, "a truncated UTF-8 sequence", FAIL)),
            (1, lambda: (b"\0" + name + b"\0" + password[:-1], "password prefix", FAIL)),
            (1, lambda: (b"\0" + name.upper() + b"\0" + password, "user in upper case", FAIL)),
            (1, lambda: (b"\0" + name + b"\0" + password + b"\n", "password with a newline", FAIL)),
            (1, lambda: (b"\0" + b"u" * n + b"\0" + password, f"a {n}-byte user", FAIL)),
            (1, lambda: (b"\0" + name + b"\0" + b"p" * n, f"a {n}-byte password", FAIL)),
            (1, lambda: (b"\0" + name + b"\0" + b"p" * SASL_MAX, "a token over the frame limit", FAIL)),
            (1, lambda: (rng.randbytes(rng.randint(1, 200)), "random bytes", FAIL)),
            (1, lambda: ("\0f\u00fc\u00e9\u0301\0".encode() + password, "a Unicode user", FAIL)),
            (2, lambda: (self.flip(valid), "valid token garbled", UNKNOWN)),
        ]
        return pick(rng, cases)()

    def flip(self, data: bytes) -> bytes:
        """``data`` with a few random bytes changed, removed or added."""
        rng = self.rng
        out = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            kind = rng.randrange(3)
            pos = rng.randrange(len(out) + 1)
            if kind == 0 and out and pos < len(out):
                out[pos] = rng.randrange(256)
            elif kind == 1 and out and pos < len(out):
                del out[pos]
            else:
                out[pos:pos] = bytes([rng.randrange(256)])
        return bytes(out)

    def scram_first(self, user: str, mutate: bool) -> tuple[bytes, str, str, bool]:
        """A client-first message, how it was made, its verdict, and whether it names a user other than the one
        whose password the client will prove (its final message must then fail)."""
        rng = self.rng
        name, nonce = escape_name(user), self.nonce()
        bare = f"n={name},r={nonce}"
        valid = f"n,,{bare}"
        if not mutate:
            return valid.encode(), "valid", OK, False
        n = self.huge()
        cases: list[tuple[int, Callable[[], tuple[str | bytes, str, str]]]] = [
            (3, lambda: (valid, "valid", OK)),
            (1, lambda: (f"y,,{bare}", "GS2 flag y", OK)),
            (1, lambda: (f"n,a={name},{bare}", "authorization id = user", OK)),
            (1, lambda: (f"n,,{bare},ext=1", "an extension", OK)),
            (1, lambda: (f"n,,{bare},tokenauth=false", "tokenauth=false", OK)),
            (1, lambda: (f"n,,{bare},tokenauth=true", "tokenauth=true (delegation tokens)", FAIL)),
            (1, lambda: (f"n,,{bare}" + ",a=b" * rng.choice((10, 5000)), "many extensions", OK)),
            (1, lambda: (f"n,,n={name},r={nonce}{'x' * n}", f"a {n}-byte nonce", OK)),
            (1, lambda: (f"n,,{bare},x={'y' * n}", f"a {n}-byte extension", OK)),
            (1, lambda: (f"p=tls-unique,,{bare}", "channel binding asked", FAIL)),
            (
                1,
                lambda: (
                    f"n,a=fuzz-scram2,{bare}" if user != "fuzz-scram2" else f"n,a=x,{bare}",
                    "another authzid",
                    FAIL,
                ),
            ),
            (1, lambda: (f"n,,n=nobody,r={nonce}", "unknown user", FAIL)),
            (1, lambda: (f"n,,n={'u' * n},r={nonce}", f"a {n}-byte user", FAIL)),
            (1, lambda: (f"n,,n=fuzz=scram,r={nonce}", "unescaped '=' in the user", FAIL)),
            (1, lambda: (f"n,,n=fuzz=2Xscram,r={nonce}", "bad escape in the user", FAIL)),
            (1, lambda: (f"n,,n=fuzz=2Cscram,r={nonce}", "escaped comma (another user)", FAIL)),
            (1, lambda: (f"n,,n=,r={nonce}", "empty user", FAIL)),
            (1, lambda: (f"n,,n={name},r=", "empty nonce", FAIL)),
            (1, lambda: (f"n,,n={name},r=ab cd", "a space in the nonce", FAIL)),
            (1, lambda: (f"n,,n={name},r=ab\x7fcd", "DEL in the nonce", FAIL)),
            (1, lambda: (f"n,,n={name},r=\u00e9t\u00e9", "non-ASCII nonce", FAIL)),
            (1, lambda: (f"n,,n={name}", "no nonce", FAIL)),
            (1, lambda: (f"n,,r={nonce}", "no user", FAIL)),
            (1, lambda: (f"n,,r={nonce},n={name}", "fields swapped", FAIL)),
            (1, lambda: (f"n,,m=ext,{bare}", "a mandatory extension", FAIL)),
            (1, lambda: (f"n,,{bare},1x=y", "an extension name with a digit", FAIL)),
            (1, lambda: (f"n,,{bare},x=", "an empty extension value", FAIL)),
            (1, lambda: (f"n,,{bare},", "a trailing comma", FAIL)),
            (1, lambda: (bare, "no GS2 header", FAIL)),
            (1, lambda: (f"x,,{bare}", "unknown GS2 flag", FAIL)),
            (1, lambda: (f"n,{bare}", "GS2 header missing a comma", FAIL)),
            (1, lambda: (f"n,,n={name}\0,r={nonce}", "NUL in the user", FAIL)),
            (1, lambda: (f"n,,n={name},r={nonce}".encode() + b"\xff\xfe", "not UTF-8", FAIL)),
            (1, lambda: (b"", "empty", FAIL)),
            (1, lambda: (f"c=biws,r={nonce},p=AAAA", "a client-final message first", FAIL)),
            (
                1,
                lambda: (
                    f"n,,n={escape_name('fuzz-scram2' if user == 'fuzz-scram' else 'fuzz-scram')},r={nonce}",
                    "another user (proving this one's password)",
                    OK,
                ),
            ),
            (2, lambda: (self.flip(valid.encode()), "valid message garbled", UNKNOWN)),
        ]
        message, how, verdict = pick(rng, cases)()
        data = message if isinstance(message, bytes) else message.encode()
        return data, how, verdict, how.startswith("another user")

    def scram_final_message(
        self, password: str, impostor: bool, gs2: str, bare: str, first: ServerFirst, mutate: bool
    ) -> tuple[bytes, str, str, bytes | None]:
        """A client-final message for ``first``, how it was made, its verdict and the server signature."""
        rng = self.rng
        hash_name = SCRAM_HASHES[self.mechanism]
        without, proof, signature = scram_final(hash_name, password, gs2, bare, first)
        verdict_ok = FAIL if impostor else OK
        valid = f"{without},p={b64(proof)}"
        if not mutate:
            return valid.encode(), "valid final", verdict_ok, signature
        n = self.huge()
        other_gs2 = "y,," if gs2.startswith("n") else "n,,"

        def signed(extensions: str, how: str) -> tuple[str, str, str, bytes | None]:
            without, proof, signature = scram_final(hash_name, password, gs2, bare, first, extensions=extensions)
            return f"{without},p={b64(proof)}", how, verdict_ok, signature

        def proof_of(hash_name: str, password: str) -> str:
            return b64(scram_final(hash_name, password, gs2, bare, first)[1])

        other_hash = "sha256" if hash_name == "sha512" else "sha512"
        cases: list[tuple[int, Callable[[], tuple[str | bytes, str, str, bytes | None]]]] = [
            (3, lambda: (valid, "valid final", verdict_ok, signature)),
            (1, lambda: signed(",x=y", "a signed extension")),
            (1, lambda: signed(",x=" + "y" * n, f"a signed {n}-byte extension")),
            (1, lambda: (f"{without},x=y,p={b64(proof)}", "an unsigned extension", FAIL, None)),
            (
                2,
                lambda: (f"{without},p={proof_of(hash_name, password + 'x')}", "proof of a wrong password", FAIL, None),
            ),
            (1, lambda: (f"{without},p={b64(rng.randbytes(len(proof)))}", "random proof", FAIL, None)),
            (1, lambda: (f"{without},p={b64(proof[:-1])}", "short proof", FAIL, None)),
            (1, lambda: (f"{without},p={b64(proof + b'x')}", "long proof", FAIL, None)),
            (1, lambda: (f"{without},p={proof_of(other_hash, password)}", "proof of the other hash", FAIL, None)),
            (1, lambda: (f"{without},p=!!!!" + b64(proof)[4:], "proof not base64", FAIL, None)),
            (1, lambda: (f"{without},p={b64(proof).rstrip('=')}", "proof without padding", FAIL, None)),
            (1, lambda: (f"{without},p=", "empty proof", FAIL, None)),
            (1, lambda: (without, "no proof", FAIL, None)),
            (1, lambda: (f"{without},p={b64(proof)},p={b64(proof)}", "proof twice", FAIL, None)),
            (1, lambda: (f"{valid},q=1", "a field after the proof", FAIL, None)),
            (
                1,
                lambda: (
                    f"c={b64(other_gs2.encode())},r={first.nonce},p={b64(proof)}",
                    "binding of another GS2 header",
                    FAIL,
                    None,
                ),
            ),
            (1, lambda: (f"c=biws!,r={first.nonce},p={b64(proof)}", "binding not base64", FAIL, None)),
            (1, lambda: (f"c=,r={first.nonce},p={b64(proof)}", "empty binding", FAIL, None)),
            (1, lambda: (f"r={first.nonce},p={b64(proof)}", "no binding", FAIL, None)),
            (
                1,
                lambda: (
                    f"r={first.nonce},c={b64(gs2.encode())},p={b64(proof)}",
                    "binding and nonce swapped",
                    FAIL,
                    None,
                ),
            ),
            (
                1,
                lambda: (
                    self.final_with_nonce(hash_name, password, gs2, bare, first, first.nonce[:24]),
                    "client nonce only",
                    FAIL,
                    None,
                ),
            ),
            (
                1,
                lambda: (
                    self.final_with_nonce(hash_name, password, gs2, bare, first, first.nonce + "x"),
                    "nonce extended",
                    FAIL,
                    None,
                ),
            ),
            (
                1,
                lambda: (
                    self.final_with_nonce(hash_name, password, gs2, bare, first, first.nonce[:-1]),
                    "nonce truncated",
                    FAIL,
                    None,
                ),
            ),
            (1, lambda: (self.final_with_nonce(hash_name, password, gs2, bare, first, ""), "empty nonce", FAIL, None)),
            (1, lambda: (valid.encode() + b"\xff", "not UTF-8", FAIL, None)),
            (1, lambda: (b"", "empty", FAIL, None)),
            (1, lambda: (f"{gs2}{bare}", "the client-first message again", FAIL, None)),
            (2, lambda: (self.flip(valid.encode()), "valid final garbled", UNKNOWN, None)),
        ]
        message, how, verdict, server_signature = pick(rng, cases)()
        data = message if isinstance(message, bytes) else message.encode()
        return data, how, verdict, server_signature

    def final_with_nonce(
        self, hash_name: str, password: str, gs2: str, bare: str, first: ServerFirst, nonce: str
    ) -> str:
        """A client-final message for another nonce, its proof computed over it (so only the nonce is wrong)."""
        without, proof, _ = scram_final(hash_name, password, gs2, bare, first, nonce=nonce)
        return f"{without},p={b64(proof)}"

    def oauth_token(self, claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
        return f"{b64url(header or {'alg': 'none'})}.{b64url(claims)}."

    def oauth_initial(self, subject: str, mutate: bool) -> tuple[bytes, str, str]:
        rng = self.rng
        now = time.time()
        claims = valid_claims(now, subject)
        token = self.oauth_token(claims)
        if not mutate:
            return initial_response(token), "valid", OK
        n = self.huge()
        jwt_cases: list[tuple[int, Callable[[], tuple[str, str, str]]]] = [
            (3, lambda: (token, "valid", OK)),
            (1, lambda: (self.oauth_token(claims | {"exp": now + 1.5}), "expiring in 1.5 s", OK)),
            (1, lambda: (self.oauth_token(claims | {"exp": now + 600.25}), "fractional exp", OK)),
            (1, lambda: (self.oauth_token(claims | {"scope": f"a {OAUTH_SCOPE} c"}), "scope string", OK)),
            (1, lambda: (self.oauth_token(claims | {"scope": ["a", f" {OAUTH_SCOPE} "]}), "scope list", OK)),
            (1, lambda: (self.oauth_token(claims | {"scope": f"{OAUTH_SCOPE} " + scopes(n)}), f"{n}-byte scope", OK)),
            (1, lambda: (self.oauth_token({k: v for k, v in claims.items() if k != "scope"}), "no scope", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"scope": "a b"}), "scope without the required one", FAIL)),
            (
                1,
                lambda: (
                    self.oauth_token(claims | {"scope": scopes(n)}),
                    f"{n}-byte scope, required one missing",
                    FAIL,
                ),
            ),
            (1, lambda: (self.oauth_token(claims | {"scope": OAUTH_SCOPE.upper()}), "scope in upper case", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"x": "y" * n}), f"a {n}-byte claim", OK)),
            (
                1,
                lambda: (
                    self.oauth_token(claims | {"sub": "f\u00fc\u00e9,=:\n\t" + subject}),
                    "another subject, odd",
                    OK,
                ),
            ),
            (1, lambda: (self.oauth_token(claims | {"sub": "s" * n}), f"another subject of {n} bytes", OK)),
            (1, lambda: (self.oauth_token(claims, {"alg": "none", "typ": "JWT", "kid": "k" * 100}), "more header", OK)),
            (1, lambda: (token.rsplit(".", 1)[0], "two parts", FAIL)),
            (1, lambda: (token + "x.", "four parts", FAIL)),
            (1, lambda: (token.replace(".", "..", 1), "'..'", FAIL)),
            (1, lambda: (token + "c2ln", "a signature", FAIL)),
            (1, lambda: (self.oauth_token(claims, {"alg": "HS256"}), "alg HS256", FAIL)),
            (1, lambda: (self.oauth_token(claims, {"typ": "JWT"}), "no alg", FAIL)),
            (1, lambda: (f"{b64url(ALG_NULL)}.{b64url(claims)}.", "alg null", FAIL)),
            (1, lambda: (f"{b64url('not json')}.{b64url(claims)}.", "header not JSON", FAIL)),
            (1, lambda: (f"{b64url('[1,2]')}.{b64url(claims)}.", "header an array", FAIL)),
            (1, lambda: (f"{b64url({'alg': 'none'})}.{b64url('{')}.", "claims not JSON", FAIL)),
            (1, lambda: (f"{b64url({'alg': 'none'})}.{b64url(JSON_STRING)}.", "claims a string", FAIL)),
            (1, lambda: (f"{b64url({'alg': 'none'})}.{b64url('[' * 100_000 + ']' * 100_000)}.", "deeply nested", FAIL)),
            (
                1,
                lambda: (
                    f"{b64url({'alg': 'none'})}.{b64url(self.raw_claims(claims, 'exp', 'NaN'))}.",
                    "exp NaN",
                    FAIL,
                ),
            ),
            (
                1,
                lambda: (
                    f"{b64url({'alg': 'none'})}.{b64url(self.raw_claims(claims, 'exp', '1e400'))}.",
                    "exp 1e400",
                    FAIL,
                ),
            ),
            (
                1,
                lambda: (
                    f"{b64url({'alg': 'none'})}.{b64url(self.raw_claims(claims, 'exp', '9' * 5000))}.",
                    "exp of 5000 digits",
                    FAIL,
                ),
            ),
            (
                1,
                lambda: (
                    f"{b64url({'alg': 'none'})}.{b64url(self.raw_claims(claims, 'exp', '-0.0'))}.",
                    "exp -0.0",
                    FAIL,
                ),
            ),
            (
                1,
                lambda: (
                    token.replace("-", "+").replace("_", "/") if "-" in token or "_" in token else "+" + token,
                    "standard base64 alphabet",
                    FAIL,
                ),
            ),
            (1, lambda: ("A" + token, "header of 4n+1 characters", FAIL)),
            (1, lambda: (self.oauth_token({k: v for k, v in claims.items() if k != "exp"}), "no exp", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"exp": now - 10}), "expired", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"exp": str(now + 600)}), "exp a string", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"exp": True}), "exp a boolean", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"exp": -5}), "exp negative", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"exp": 1e13 + 1}), "exp out of range", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"exp": 10**30}), "exp 10**30", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"iat": now + 3600}), "iat in the future", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"iat": now + 300, "exp": now + 200}), "iat after exp", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"iat": "yesterday"}), "iat a string", FAIL)),
            (1, lambda: (self.oauth_token({k: v for k, v in claims.items() if k != "sub"}), "no sub", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"sub": ""}), "empty sub", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"sub": " \t"}), "blank sub", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"sub": 42}), "sub a number", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"sub": [subject]}), "sub a list", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"scope": 7}), "scope a number", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"scope": ["a", 1]}), "scope list with a number", FAIL)),
            (1, lambda: (self.oauth_token(claims | {"scope": {"a": 1}}), "scope an object", FAIL)),
            (2, lambda: (self.flip(token.encode()).decode("latin-1"), "token garbled", UNKNOWN)),
        ]
        token, how, verdict = pick(rng, jwt_cases)()
        escaped = subject.replace("=", "=3D").replace(",", "=2C")
        message_cases: list[tuple[int, Callable[[], tuple[bytes, str, str]]]] = [
            (12, lambda: (initial_response(token), "", OK)),
            (1, lambda: (initial_response(token, flag="y"), "GS2 flag y", OK)),
            (1, lambda: (initial_response(token, authzid=escaped), "authorization id = subject", OK)),
            (1, lambda: (initial_response(token, scheme="bearer "), "scheme in lower case", OK)),
            (1, lambda: (initial_response(token, scheme="Bearer  "), "two spaces", OK)),
            (1, lambda: (initial_response(token, extensions="traceId=abc 1\x01"), "an extension", OK)),
            (1, lambda: (initial_response(token, extensions=f"big={'v' * n}\x01"), f"a {n}-byte extension", OK)),
            (1, lambda: (initial_response(token, extensions="a=1\x01" * 2000), "2000 extensions (one name)", FAIL)),
            (1, lambda: (initial_response(token, authzid="someone"), "another authorization id", FAIL)),
            (1, lambda: (initial_response(token, flag="p=tls-unique"), "channel binding", FAIL)),
            (1, lambda: (initial_response(token, scheme="Basic "), "scheme Basic", FAIL)),
            (1, lambda: (initial_response(token, extensions="k3y=v\x01"), "extension name with a digit", FAIL)),
            (1, lambda: (initial_response(token, extensions="k=\x01"), "empty extension value", FAIL)),
            (1, lambda: (initial_response(token, extensions="k=\u00e9\x01"), "non-ASCII extension value", FAIL)),
            (1, lambda: (initial_response(token, extensions=f"auth=Bearer {token}\x01"), "auth twice", FAIL)),
            (1, lambda: (b"n,,\x01\x01", "no auth", FAIL)),
            (1, lambda: (initial_response(token).replace(b"\x01", b"", 1), "first \\x01 missing", FAIL)),
            (1, lambda: (initial_response(token)[:-1], "last \\x01 missing", FAIL)),
            (1, lambda: (initial_response(token).replace(b"\x01", b""), "no \\x01", FAIL)),
            (1, lambda: (initial_response(token) + b"\x01", "an extra \\x01", FAIL)),
            (1, lambda: (initial_response(token).replace(b"\x01", b"\x01\x01"), "\\x01 doubled", FAIL)),
            (1, lambda: (initial_response(token) + b"\xff", "not UTF-8", FAIL)),
            (1, lambda: (initial_response(token + " x"), "a space in the token", FAIL)),
            (1, lambda: (initial_response(""), "an empty token", FAIL)),
            (1, lambda: (b"", "empty", FAIL)),
        ]
        message, message_how, message_verdict = pick(rng, message_cases)()
        if message_how == "authorization id = subject" and "another subject" in how:
            message_verdict = FAIL  # (the authorization id is the usual subject, not the token's)
        hows = " + ".join(h for h in (how, message_how) if h)
        return message, hows, combine(verdict, message_verdict)

    @staticmethod
    def raw_claims(claims: dict[str, Any], name: str, literal: str) -> str:
        """The claims as JSON text with ``name``'s value written as ``literal`` (not JSON's own numbers)."""
        return json.dumps(claims | {name: 0}).replace(f'"{name}": 0', f'"{name}": {literal}')


def scopes(size: int) -> str:
    """About ``size`` characters of distinct scopes."""
    return " ".join(f"s{i}" for i in range(size // 7))


def valid_claims(now: float, subject: str = OAUTH_SUBJECTS[0]) -> dict[str, Any]:
    return {"sub": subject, "iat": int(now) - 5, "exp": int(now) + 600, "scope": OAUTH_SCOPE}


def initial_response(
    token: str, *, flag: str = "n", authzid: str = "", scheme: str = "Bearer ", extensions: str = ""
) -> bytes:
    authz = f"a={authzid}" if authzid else ""
    return f"{flag},{authz},\x01auth={scheme}{token}\x01{extensions}\x01".encode()


def _claimed_key(frame: bytes) -> int | None:
    if len(frame) < 12:
        return None
    return int(struct.unpack_from(">h", frame, 4)[0])


class Run(ScriptRun):
    mode = "sasl"

    def __init__(self, options: Options, server: ServerProcess) -> None:
        super().__init__(options, server, SaslScript)
        self.health_count = 0

    async def _health_check(self) -> bool:
        self.health_count += 1
        return await health_check(self.server.port, self.health_count)
