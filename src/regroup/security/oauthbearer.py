"""SASL/OAUTHBEARER's server side (RFC 7628; KIP-255 for unsecured tokens, KIP-768 for signed ones), as Kafka's
``OAuthBearerSaslServer`` runs it: the client's initial response carries a bearer token, a validator checks it,
and the principal is the token's subject.

The initial response (RFC 7628 §3.1)::

    n,[a=authzid],^Aauth=Bearer <token>^A[key=value^A]*^A

``^A`` is the byte 0x01. The GS2 header is ``n`` or ``y`` (``p=``, channel binding, is refused); the
``auth`` pair is required, its scheme ``Bearer`` in any case; other pairs are SASL extensions (KIP-342): they
must be well formed (a name of letters, a value of printable ASCII, spaces and tabs, each name once) and are
otherwise ignored. An authorization id, if given, must equal the token's principal.

Two validators, both pure and given the time (``now_ms``):

- :class:`UnsecuredValidator` — Kafka's unsecured JWS (``OAuthBearerUnsecuredValidatorCallbackHandler``): the
  header says ``"alg":"none"`` and the signature part is empty; the principal claim (``sub`` by default) is a
  non-empty string; ``exp`` (seconds, possibly fractional) is required and not past now minus the allowed clock
  skew; ``iat``, if present, is not after now plus the skew and is before ``exp``; every required scope is in
  the scope claim. For development only, as in Kafka.
- :class:`JwksValidator` — signed JWTs (Kafka's ``ValidatorAccessTokenValidator``) verified against the keys
  of a JWKS document given in memory: RSA (RS256/384/512, PS256/384/512), EC (ES256, ES384, ES512 on their
  curves, ES256K) and EdDSA keys; the token's ``kid`` picks the key; ``alg`` must suit the key (``none`` and
  the HMAC algorithms are never accepted: a public key is no shared secret). ``exp`` and ``iat`` are required,
  ``nbf`` optional, all judged against ``now_ms`` with the clock skew; issuer and audience are checked when
  configured. PyJWT verifies only the signature here: every time check is this module's.

The scope claim may be a space-separated string (RFC 8693) or a list of strings. (Kafka takes a string claim
as one scope; for a claim holding one scope both agree.)

A token that fails validation ends the exchange as Kafka's does: the server sends an error challenge
``{"status":"invalid_token"}`` (``"insufficient_scope"`` with the required ``scope`` when a scope is missing),
the client answers with a single ``0x01`` byte and the authentication fails. :class:`OAuthBearerServer` returns
that as ``Failed(reason, challenge=<the JSON>)``: the caller sends the challenge, reads the client's answer and
then fails the authentication with ``reason``; the server instance evaluates nothing after it. No reason holds
the token.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import jwt

from regroup.security.sasl import Complete, Failed, SaslStep

__all__ = [
    "MECHANISM",
    "JwksError",
    "JwksValidator",
    "OAuthBearerServer",
    "TokenError",
    "TokenValidator",
    "UnsecuredValidator",
    "ValidatedToken",
    "parse_initial_response",
]

MECHANISM: Final = "OAUTHBEARER"
INVALID_TOKEN: Final = "invalid_token"
INSUFFICIENT_SCOPE: Final = "insufficient_scope"


@dataclass(frozen=True, slots=True)
class ValidatedToken:
    """What a valid token says: its principal, when it expires (wall-clock ms), its scopes and when it was
    issued (ms, None without ``iat``)."""

    principal: str
    expires_ms: int
    scopes: frozenset[str]
    issued_at_ms: int | None = None


class TokenError(Exception):
    """A token that is not valid: ``reason`` (one line, never the token), the RFC 6750 error ``status`` and,
    for ``insufficient_scope``, the ``scope`` required (space-separated)."""

    def __init__(self, reason: str, status: str = INVALID_TOKEN, scope: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.scope = scope


class TokenValidator(Protocol):
    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        """The validated token; raises :class:`TokenError`."""
        ...


# ---------------------------------------------------------------------- the initial response


@dataclass(frozen=True, slots=True)
class InitialResponse:
    token: str
    authzid: str  # "" when none was given
    extensions: dict[str, str]


_SASLNAME: Final = r"(?:[^\x00=,]|=2C|=3D)+"
_INITIAL_RESPONSE: Final = re.compile(
    rf"(?P<flag>[ny]|p=[A-Za-z0-9.\-]+),(?:a=(?P<authzid>{_SASLNAME}))?,\x01"
    r"(?P<pairs>(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*)\x01"
)
_AUTH: Final = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_ESCAPED: Final = re.compile("=2C|=3D")
AUTH_KEY: Final = "auth"


class _Malformed(Exception):
    pass


def parse_initial_response(data: bytes) -> InitialResponse:
    """The token, authorization id and extensions of a client's initial response; raises ``ValueError`` with a
    one-line reason (never the token)."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("Invalid OAUTHBEARER client first message: not UTF-8") from None
    message = _INITIAL_RESPONSE.fullmatch(text)
    if message is None:
        raise ValueError("Invalid OAUTHBEARER client first message")
    if message.group("flag").startswith("p="):
        raise ValueError("Authentication failed: channel binding is not supported")
    pairs: dict[str, str] = {}
    for pair in message.group("pairs").split("\x01")[:-1]:
        key, value = pair.split("=", 1)
        if key in pairs:
            raise ValueError(f"Invalid OAUTHBEARER client first message: '{key}' given twice")
        pairs[key] = value
    auth = pairs.pop(AUTH_KEY, None)
    if auth is None:
        raise ValueError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    credentials = _AUTH.fullmatch(auth)
    if credentials is None:
        raise ValueError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if credentials.group("scheme").lower() != "bearer":
        raise ValueError("Invalid scheme in OAUTHBEARER client first message")
    authzid = message.group("authzid") or ""
    authzid = _ESCAPED.sub(lambda m: "," if m.group() == "=2C" else "=", authzid)
    return InitialResponse(credentials.group("token"), authzid, pairs)


# ---------------------------------------------------------------------- the server


class OAuthBearerServer:
    """The server side of one OAUTHBEARER exchange, validating with ``validator``."""

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._done = False

    @property
    def mechanism(self) -> str:
        return MECHANISM

    def evaluate(self, token: bytes, now_ms: int) -> SaslStep:
        if self._done:
            return Failed("Authentication failed: the OAUTHBEARER exchange is already over")
        self._done = True
        try:
            response = parse_initial_response(token)
        except ValueError as exc:
            return Failed(str(exc))
        try:
            validated = self._validator.validate(response.token, now_ms)
        except TokenError as exc:
            error: dict[str, str] = {"status": exc.status}
            if exc.scope is not None:
                error["scope"] = exc.scope
            challenge = json.dumps(error, separators=(",", ":")).encode("utf-8")
            return Failed(f"Authentication failed: {exc.reason}", challenge=challenge)
        if response.authzid and response.authzid != validated.principal:
            return Failed(
                f"Authentication failed: Client requested an authorization id ({response.authzid}) that is different "
                f"from the token's principal name ({validated.principal})",
                validated.principal,
            )
        return Complete(validated.principal, b"", validated.expires_ms)


# ---------------------------------------------------------------------- claims, shared by both validators


_B64URL: Final = re.compile(r"[A-Za-z0-9_-]*")


def _b64url_json(part: str, what: str) -> dict[str, Any]:
    if _B64URL.fullmatch(part) is None or len(part) % 4 == 1:
        raise TokenError(f"malformed Base64 URL encoded value in the {what}")
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw, parse_constant=_no_constant)
    except (binascii.Error, ValueError, RecursionError):
        raise TokenError(f"malformed JSON in the {what}") from None
    if not isinstance(value, dict):
        raise TokenError(f"malformed JSON in the {what}: not an object")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _time_ms(claims: Mapping[str, Any], name: str, *, required: bool) -> int | None:
    """A NumericDate claim in ms (it may be fractional), None when absent and not required."""
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenError(f"Required claim missing: {name}")
        return None
    if not _is_number(value):
        raise TokenError(f"The {name} claim had the incorrect type: {_type_name(value)}")
    seconds: float = value
    if seconds < 0:
        raise TokenError(f"The {name} claim must be non-negative")
    if seconds > 1e13:  # (year 318857: no real token; keeps the arithmetic in range)
        raise TokenError(f"The {name} claim is out of range")
    return round(seconds * 1000)


def _type_name(value: Any) -> str:
    return {str: "String", bool: "Boolean", list: "List", dict: "Object"}.get(type(value), type(value).__name__)


def _principal(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if value is None:
        raise TokenError(f"Required claim missing: {name}")
    if not isinstance(value, str):
        raise TokenError(f"The {name} claim had the incorrect type: {_type_name(value)}")
    if not value.strip():
        raise TokenError(f"No principal name in JWT claim: {name}")
    return value


def _scopes(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return frozenset(item.strip() for item in value if item.strip())
    raise TokenError(f"The '{name}' claim was not of type List or String: {_type_name(value)}")


# ---------------------------------------------------------------------- unsecured tokens (KIP-255)


class UnsecuredValidator:
    """Kafka's unsecured-token validator (``unsecuredValidatorPrincipalClaimName``, ``...ScopeClaimName``,
    ``...RequiredScope``, ``...AllowableClockSkewMs``)."""

    def __init__(
        self,
        *,
        principal_claim: str = "sub",
        scope_claim: str = "scope",
        required_scope: Iterable[str] = (),
        clock_skew_ms: int = 0,
    ) -> None:
        if not principal_claim.strip() or not scope_claim.strip():
            raise ValueError("the principal and scope claim names must not be blank")
        if clock_skew_ms < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {clock_skew_ms}")
        self.principal_claim = principal_claim.strip()
        self.scope_claim = scope_claim.strip()
        self.required_scope = tuple(required_scope)
        self.clock_skew_ms = clock_skew_ms

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        if ".." in token:
            raise TokenError("Malformed compact serialization contains '..'")
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenError("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
        header = _b64url_json(parts[0], "header")
        claims = _b64url_json(parts[1], "claims")
        if header.get("alg") != "none":
            raise TokenError("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise TokenError("Unsecured JWS must not contain a digital signature")
        scopes = _scopes(claims, self.scope_claim)
        if claims.get("exp") is None:
            raise TokenError("No expiration time in JWT")
        expires_ms = _time_ms(claims, "exp", required=True)
        assert expires_ms is not None
        principal = _principal(claims, self.principal_claim)
        issued_ms = _time_ms(claims, "iat", required=False)
        skew = self.clock_skew_ms
        if issued_ms is not None and issued_ms > now_ms + skew:
            raise TokenError(
                f"The Issued At value ({issued_ms} ms) was after the indicated time ({now_ms} ms) plus allowable "
                f"clock skew ({skew} ms)"
            )
        if now_ms - skew >= expires_ms:
            raise TokenError(
                f"The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on or after the "
                f"Expiration Time value ({expires_ms} ms)"
            )
        if issued_ms is not None and expires_ms <= issued_ms:
            raise TokenError(f"The Expiration Time ({expires_ms} ms) was not after the Issued At time ({issued_ms} ms)")
        for needed in self.required_scope:
            if needed not in scopes:
                raise TokenError(
                    f"The provided scope ({' '.join(sorted(scopes))}) was missing a required scope ({needed}). "
                    f"All required scope elements: {' '.join(self.required_scope)}",
                    INSUFFICIENT_SCOPE,
                    " ".join(self.required_scope),
                )
        return ValidatedToken(principal, expires_ms, scopes, issued_ms)


# ---------------------------------------------------------------------- signed tokens against a JWKS (KIP-768)


class JwksError(ValueError):
    """A JWKS document that cannot be used (one line)."""


#: the algorithms a key type may sign with (never ``none``, never a shared-secret HMAC)
_RSA_ALGORITHMS: Final = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_EC_ALGORITHM_OF_CURVE: Final = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512", "secp256k1": "ES256K"}
_OKP_CURVES: Final = frozenset({"Ed25519", "Ed448"})


@dataclass(frozen=True, slots=True)
class _Key:
    kid: str | None
    algorithms: frozenset[str]
    key: Any  # a ``cryptography`` public key


def _usable_key(index: int, jwk: Any) -> _Key | None:
    """The key of one JWKS entry; None for an entry not meant for verifying signatures (``use`` other than
    ``sig``, a symmetric ``oct`` key, a key type PyJWT does not know)."""
    if not isinstance(jwk, dict):
        raise JwksError(f"JWKS key #{index} is not an object")
    kty, use, declared = jwk.get("kty"), jwk.get("use"), jwk.get("alg")
    kid = jwk.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise JwksError(f"JWKS key #{index}: kid is not a string")
    if use not in (None, "sig"):
        return None
    if kty == "RSA":
        algorithms = _RSA_ALGORITHMS
    elif kty == "EC":
        curve_alg = _EC_ALGORITHM_OF_CURVE.get(jwk.get("crv", ""))
        if curve_alg is None:
            raise JwksError(f"JWKS key #{index}: unsupported EC curve")
        algorithms = frozenset({curve_alg})
    elif kty == "OKP":
        if jwk.get("crv") not in _OKP_CURVES:
            raise JwksError(f"JWKS key #{index}: unsupported OKP curve")
        algorithms = frozenset({"EdDSA"})
    else:
        return None
    if declared is not None:
        if declared not in algorithms:
            raise JwksError(f"JWKS key #{index}: algorithm {declared!s:.20} does not suit a {kty} key")
        algorithms = frozenset({declared})
    try:
        parsed = jwt.PyJWK(jwk, algorithm=min(algorithms))
    except (jwt.PyJWTError, ValueError, TypeError, KeyError) as exc:
        raise JwksError(f"JWKS key #{index} ({kty}) is not a valid key: {type(exc).__name__}") from None
    key = parsed.key
    if hasattr(key, "public_key"):  # (a private key given by mistake: verify with its public half)
        key = key.public_key()
    return _Key(kid, algorithms, key)


class JwksValidator:
    """Signed JWTs checked against the keys of ``jwks`` (a parsed JWKS document, ``{"keys": [...]}``), with
    Kafka's ``sasl.oauthbearer.*`` settings: expected issuer and audiences (unchecked when not given), clock
    skew in seconds, the claim naming the principal and the claim holding the scopes. ``require_iat``: a token
    must carry ``iat``, as Kafka's validator requires."""

    def __init__(
        self,
        jwks: Mapping[str, Any],
        *,
        expected_issuer: str | None = None,
        expected_audience: Iterable[str] = (),
        clock_skew_s: int = 30,
        sub_claim: str = "sub",
        scope_claim: str = "scope",
        require_iat: bool = True,
    ) -> None:
        entries = jwks.get("keys") if isinstance(jwks, Mapping) else None
        if not isinstance(entries, list):
            raise JwksError("the JWKS document has no 'keys' list")
        keys = [key for index, entry in enumerate(entries) if (key := _usable_key(index, entry)) is not None]
        if not keys:
            raise JwksError("the JWKS document has no key for verifying signatures")
        if clock_skew_s < 0:
            raise ValueError(f"the clock skew must not be negative: {clock_skew_s}")
        if not sub_claim.strip() or not scope_claim.strip():
            raise ValueError("the sub and scope claim names must not be blank")
        self._keys = keys
        self.expected_issuer = expected_issuer
        self.expected_audience = frozenset(expected_audience)
        self.clock_skew_ms = clock_skew_s * 1000
        self.sub_claim = sub_claim.strip()
        self.scope_claim = scope_claim.strip()
        self.require_iat = require_iat

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        parts = token.split(".")
        if len(parts) != 3 or not all(parts):
            raise TokenError("Could not validate the access token: not a signed JWT in compact serialization")
        header = _b64url_json(parts[0], "header")
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg == "none" or alg.startswith("HS"):
            raise TokenError("Could not validate the access token: the algorithm is not allowed")
        if kid is not None and not isinstance(kid, str):
            raise TokenError("Could not validate the access token: kid is not a string")
        candidates = [k for k in self._keys if alg in k.algorithms and (kid is None or k.kid == kid)]
        if not candidates:
            what = "no key with this kid" if kid is not None and not any(k.kid == kid for k in self._keys) else None
            raise TokenError(f"Could not validate the access token: {what or 'no key suits the algorithm'}")
        payload = self._verified_payload(token, alg, candidates)
        claims = _b64url_json(payload, "claims")
        return self._check_claims(claims, now_ms)

    def _verified_payload(self, token: str, alg: str, candidates: list[_Key]) -> str:
        for candidate in candidates:
            try:
                jwt.PyJWS().decode_complete(token, key=candidate.key, algorithms=[alg])
            except Exception:  # PyJWT's errors, and whatever a strange key or token makes it raise
                continue
            return token.split(".")[1]
        raise TokenError("Could not validate the access token: the signature is not valid")

    def _check_claims(self, claims: Mapping[str, Any], now_ms: int) -> ValidatedToken:
        skew = self.clock_skew_ms
        expires_ms = _time_ms(claims, "exp", required=True)
        assert expires_ms is not None
        issued_ms = _time_ms(claims, "iat", required=self.require_iat)
        not_before_ms = _time_ms(claims, "nbf", required=False)
        if now_ms - skew >= expires_ms:
            raise TokenError("Could not validate the access token: the token has expired")
        if not_before_ms is not None and now_ms + skew < not_before_ms:
            raise TokenError("Could not validate the access token: the token is not valid yet (nbf)")
        if issued_ms is not None and issued_ms > now_ms + skew:
            raise TokenError("Could not validate the access token: the token was issued in the future (iat)")
        if self.expected_issuer is not None and claims.get("iss") != self.expected_issuer:
            raise TokenError("Could not validate the access token: the issuer (iss) is not the one expected")
        if self.expected_audience:
            audience = claims.get("aud")
            given = {audience} if isinstance(audience, str) else audience if isinstance(audience, list) else []
            if not any(isinstance(a, str) and a in self.expected_audience for a in given):
                raise TokenError("Could not validate the access token: the audience (aud) is not one expected")
        principal = _principal(claims, self.sub_claim).strip()
        return ValidatedToken(principal, expires_ms, _scopes(claims, self.scope_claim), issued_ms)
