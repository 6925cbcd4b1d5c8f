"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; KIP-84): the mechanisms, the stored credential (salt,
StoredKey, ServerKey, iteration count — never the password) and the server side of one exchange, as Kafka's
``ScramSaslServer`` runs it.

The exchange::

    client-first   n,[a=authzid],n=user,r=cnonce[,ext=value]*
    server-first   r=cnonce+snonce,s=base64(salt),i=iterations
    client-final   c=base64(gs2 header),r=cnonce+snonce[,ext=value]*,p=base64(ClientProof)
    server-final   v=base64(ServerSignature)

What the server checks, with Kafka's messages where Kafka has one:

- client-first: the GS2 header is ``n`` or ``y`` (``p=``, channel binding, is refused: there is none to bind
  to); no mandatory extension (``m=``); the user name decodes (``=2C`` is ``,``, ``=3D`` is ``=``; any other
  ``=`` is malformed); an authorization id, if given, equals the user name. Extensions are ignored, except
  ``tokenauth=true``: delegation tokens (KIP-48) are not supported, so it is refused. The user's credential is
  looked up here and a user without one fails at once, as in Kafka; so does a credential with fewer iterations
  than the mechanism's minimum.
- client-final: the channel binding ``c=`` is exactly the client-first's GS2 header; the nonce is exactly the
  combined nonce of the server-first message (Kafka 4's strict check); the proof, XORed with the ClientSignature
  and hashed, is the StoredKey (compared in constant time).

Any message out of order, after the end, or malformed is :class:`Failed`; no input raises. Passwords are UTF-8
encoded as they are (no SASLprep), as Kafka's ``ScramFormatter`` does; user names may be any UTF-8 text without
NUL (RFC 5802; Kafka's own parser keeps to ASCII). The server nonce comes from the caller (``nonce()``), which
must give printable ASCII without commas."""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from regroup.security.sasl import Complete, Continue, Failed, SaslStep

__all__ = [
    "MECHANISMS",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "credential_from_password",
    "credential_from_salted_password",
    "mechanism_named",
    "mechanism_of_type",
    "salted_password",
]


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    """One SCRAM mechanism: its IANA name, hash (a ``hashlib`` name), Kafka's wire code (the ``Mechanism`` of
    DescribeUserScramCredentials and AlterUserScramCredentials) and the iteration bounds Kafka applies."""

    name: str
    hash_name: str
    type_code: int
    min_iterations: int = 4096
    max_iterations: int = 16384

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()


SCRAM_SHA_256: Final = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512: Final = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
#: name -> mechanism
MECHANISMS: Final[dict[str, ScramMechanism]] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


def mechanism_named(name: str) -> ScramMechanism | None:
    """The mechanism called ``name`` (``SCRAM-SHA-256``, ``SCRAM-SHA-512``), None for any other."""
    return MECHANISMS.get(name)


def mechanism_of_type(type_code: int) -> ScramMechanism | None:
    """The mechanism of Kafka's wire code (1: SHA-256, 2: SHA-512), None for 0 (UNKNOWN) or any other."""
    return next((m for m in MECHANISMS.values() if m.type_code == type_code), None)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps of a SCRAM password (RFC 5802 §3): the salt, StoredKey = H(HMAC(SaltedPassword,
    "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key") and the iteration count."""

    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's ``Hi(password, salt, i)``: PBKDF2 with the mechanism's HMAC, one hash-sized block."""
    if iterations < 1:
        raise ValueError("SCRAM iterations must be at least 1")
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(
    mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential of a salted password (what AlterUserScramCredentials carries)."""
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(
        salt=bytes(salt),
        stored_key=mechanism.hash(client_key),
        server_key=mechanism.hmac(salted, b"Server Key"),
        iterations=iterations,
    )


def credential_from_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> ScramCredential:
    """The credential of a password, salted with ``salt`` over ``iterations``."""
    return credential_from_salted_password(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations
    )


# ---------------------------------------------------------------------- message syntax (RFC 5802 §7)

#: a user name or authorization id: UTF-8 without NUL, "," and "=", which are written "=2C" and "=3D"
_SASLNAME: Final = r"(?:[^\x00=,]|=2C|=3D)+"
#: a nonce: printable ASCII except ","
_PRINTABLE: Final = r"[\x21-\x2b\x2d-\x7e]+"
_BASE64: Final = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)?"
_EXTENSIONS: Final = r"(?:,[A-Za-z]+=[^\x00,]+)*"

_GS2_HEADER: Final = re.compile(rf"(?P<flag>[ny]|p=[A-Za-z0-9.\-]+),(?:a=(?P<authzid>{_SASLNAME}))?,")
_CLIENT_FIRST_BARE: Final = re.compile(rf"n=(?P<name>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<ext>{_EXTENSIONS})")
_CLIENT_FINAL: Final = re.compile(
    rf"(?P<bare>c=(?P<binding>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})"
)
_NONCE: Final = re.compile(_PRINTABLE)
_ESCAPED: Final = re.compile("=2C|=3D")

#: Kafka's SCRAM extension that asks for delegation-token authentication (KIP-48)
TOKEN_AUTH: Final = "tokenauth"


def _decode_name(saslname: str) -> str:
    return _ESCAPED.sub(lambda m: "," if m.group() == "=2C" else "=", saslname)


class _State(enum.Enum):
    CLIENT_FIRST = "client-first"
    CLIENT_FINAL = "client-final"
    OVER = "over"


class ScramServer:
    """The server side of one SCRAM exchange. ``lookup(user)``: the user's credential for this mechanism, or
    None; ``nonce()``: a fresh random server nonce (printable ASCII without commas)."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Callable[[str], ScramCredential | None],
        nonce: Callable[[], str],
    ) -> None:
        self._mechanism = mechanism
        self._lookup = lookup
        self._nonce = nonce
        self._state = _State.CLIENT_FIRST
        self._user = ""
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._combined_nonce = ""
        self._credential: ScramCredential | None = None

    @property
    def mechanism(self) -> str:
        return self._mechanism.name

    def evaluate(self, token: bytes, now_ms: int) -> SaslStep:
        state, self._state = self._state, _State.OVER  # (whatever happens, a step is taken only once)
        if state is _State.OVER:
            return Failed(f"Unexpected SASL/{self._mechanism.name} message: the exchange is over")
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            step: SaslStep = Failed(f"Invalid SCRAM {state.value} message: not UTF-8", self._user or None)
        else:
            step = self._client_first(text) if state is _State.CLIENT_FIRST else self._client_final(text)
        if isinstance(step, Continue):
            self._state = _State.CLIENT_FINAL
        else:
            self._forget()
        return step

    def _client_first(self, text: str) -> SaslStep:
        header = _GS2_HEADER.match(text)
        if header is None:
            return Failed("Invalid SCRAM client first message format")
        if header.group("flag").startswith("p="):
            return Failed("Authentication failed: channel binding is not supported")
        bare = text[header.end() :]
        if bare.startswith("m="):
            return Failed("Authentication failed: mandatory SCRAM extensions are not supported")
        message = _CLIENT_FIRST_BARE.fullmatch(bare)
        if message is None:
            return Failed("Invalid SCRAM client first message format")
        user = _decode_name(message.group("name"))
        extensions = [pair.split("=", 1) for pair in message.group("ext").split(",")[1:]]
        if any(key == TOKEN_AUTH and value.lower() == "true" for key, value in extensions):
            return Failed("Authentication failed: delegation token authentication is not supported", user)
        authzid = header.group("authzid")
        if authzid is not None and _decode_name(authzid) != user:
            return Failed(
                "Authentication failed: Client requested an authorization id that is different from username", user
            )
        try:
            credential = self._lookup(user)
        except Exception:
            return Failed("Authentication failed: Credentials could not be obtained", user)
        if credential is None:
            return Failed("Authentication failed: Invalid user credentials", user)
        if credential.iterations < self._mechanism.min_iterations:
            return Failed(
                f"Iterations {credential.iterations} is less than the minimum {self._mechanism.min_iterations} "
                f"for {self._mechanism.name}",
                user,
            )
        server_nonce = self._nonce()
        if _NONCE.fullmatch(server_nonce) is None:
            raise ValueError("the SCRAM server nonce must be printable ASCII without commas")
        self._user = user
        self._gs2_header = text[: header.end()]
        self._client_first_bare = bare
        self._combined_nonce = message.group("nonce") + server_nonce
        self._credential = credential
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={self._combined_nonce},s={salt},i={credential.iterations}"
        return Continue(self._server_first.encode("ascii"))

    def _client_final(self, text: str) -> SaslStep:
        user, credential = self._user, self._credential
        assert credential is not None  # (set with the CLIENT_FINAL state)
        message = _CLIENT_FINAL.fullmatch(text)
        if message is None:
            return Failed("Invalid SCRAM client final message format", user)
        binding = base64.b64decode(message.group("binding"))
        if not hmac.compare_digest(binding, self._gs2_header.encode("utf-8")):
            return Failed("Authentication failed: the channel binding does not match the GS2 header", user)
        if not hmac.compare_digest(message.group("nonce").encode("ascii"), self._combined_nonce.encode("ascii")):
            return Failed("Invalid client nonce in the final client message.", user)
        try:
            proof = base64.b64decode(message.group("proof"), validate=True)
        except binascii.Error:
            return Failed("Invalid SCRAM client final message format", user)
        auth_message = f"{self._client_first_bare},{self._server_first},{message.group('bare')}".encode()
        client_signature = self._mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            return Failed("Authentication failed: Invalid client credentials", user)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(self._mechanism.hash(client_key), credential.stored_key):
            return Failed("Authentication failed: Invalid client credentials", user)
        server_signature = self._mechanism.hmac(credential.server_key, auth_message)
        return Complete(user, b"v=" + base64.b64encode(server_signature))

    def _forget(self) -> None:
        self._credential = None
        self._gs2_header = self._client_first_bare = self._server_first = self._combined_nonce = ""
