"""SASL/OAUTHBEARER's server side (``security/oauthbearer.py``): the client's initial response, Kafka's unsecured
tokens and signed JWTs checked against a JWKS, with keys made here."""

from __future__ import annotations

import base64
import json
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.security.oauthbearer import (
    JwksError,
    JwksValidator,
    OAuthBearerServer,
    TokenError,
    UnsecuredValidator,
    ValidatedToken,
    parse_initial_response,
)
from regroup.security.sasl import Complete, Failed, SaslServer

NOW_S = 1_700_000_000
NOW_MS = NOW_S * 1000


def b64url(data: dict[str, Any] | bytes) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsecured(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    return f"{b64url(header or {'alg': 'none'})}.{b64url(claims)}."


def initial(token: str, authzid: str = "", extensions: str = "") -> bytes:
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}\x01{extensions}\x01".encode()


def good_claims(**extra: Any) -> dict[str, Any]:
    return {"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 3600, **extra}


# ---------------------------------------------------------------------- the initial response


def test_initial_response_parts() -> None:
    response = parse_initial_response(initial("abc.def.", authzid="al=2Cice", extensions="traceId=x y\x01"))
    assert response.token == "abc.def."
    assert response.authzid == "al,ice"
    assert response.extensions == {"traceId": "x y"}
    assert parse_initial_response(b"y,,\x01auth=bEaReR   t0k-en==\x01\x01").token == "t0k-en=="


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"n,,\x01\x01",  # no auth
        b"n,,\x01auth=Bearer tok\x01",  # no final ^A
        b"p=tls-unique,,\x01auth=Bearer tok\x01\x01",
        b"n,,\x01auth=Basic dXNlcjpwYXNz\x01\x01",
        b"n,,\x01auth=Bearer\x01\x01",
        b"n,,\x01auth=Bearer tok en\x01\x01",
        b"n,,\x01auth=Bearer tok\x01auth=Bearer tok\x01\x01",
        b"n,,\x01auth=Bearer tok\x01k3y=v\x01\x01",  # a digit in an extension name
        b"n,,\x01auth=Bearer tok\x01key=\x01\x01",
        b"n,,\x01auth=Bearer tok\x01key=\xc3\xa9\x01\x01",  # a non-ASCII extension value
        b"n,,\x01auth=Bearer \xff\x01\x01",
    ],
)
def test_malformed_initial_responses(data: bytes) -> None:
    with pytest.raises(ValueError):
        parse_initial_response(data)
    step = OAuthBearerServer(UnsecuredValidator()).evaluate(data, NOW_MS)
    assert isinstance(step, Failed) and step.challenge is None


# ---------------------------------------------------------------------- unsecured tokens


def test_unsecured_good_token() -> None:
    server: SaslServer = OAuthBearerServer(UnsecuredValidator())
    assert server.mechanism == "OAUTHBEARER"
    step = server.evaluate(initial(unsecured(good_claims()), extensions="a=b\x01"), NOW_MS)
    assert step == Complete("alice", b"", (NOW_S + 3600) * 1000)
    assert isinstance(server.evaluate(b"\x01", NOW_MS), Failed)  # over


def test_unsecured_claims_and_scopes() -> None:
    validator = UnsecuredValidator(principal_claim="client_id", required_scope=("read", "write"), clock_skew_ms=500)
    token = unsecured({"client_id": "svc", "exp": NOW_S + 0.25, "scope": "read write extra"})
    expected = ValidatedToken("svc", NOW_MS + 250, frozenset({"read", "write", "extra"}))
    assert validator.validate(token, NOW_MS) == expected
    token = unsecured({"client_id": "svc", "exp": NOW_S + 1, "scope": ["read", " write "]})
    assert validator.validate(token, NOW_MS).scopes == frozenset({"read", "write"})
    # the skew: expired 400 ms ago is still fine with 500 ms of skew, 500 ms ago is not
    assert validator.validate(unsecured({"client_id": "s", "exp": NOW_S - 0.4, "scope": "read write"}), NOW_MS)
    with pytest.raises(TokenError):
        validator.validate(unsecured({"client_id": "s", "exp": NOW_S - 0.5, "scope": "read write"}), NOW_MS)


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        (good_claims(exp=NOW_S - 1), "on or after the Expiration Time"),
        (good_claims(exp=NOW_S), "on or after the Expiration Time"),
        ({"sub": "alice"}, "No expiration time in JWT"),
        ({"exp": NOW_S + 60}, "Required claim missing: sub"),
        (good_claims(sub=""), "No principal name in JWT claim: sub"),
        (good_claims(sub="  "), "No principal name in JWT claim: sub"),
        (good_claims(sub=42), "The sub claim had the incorrect type"),
        (good_claims(exp="tomorrow"), "The exp claim had the incorrect type"),
        (good_claims(exp=True), "The exp claim had the incorrect type"),
        (good_claims(iat=NOW_S + 5), "The Issued At value"),
        (good_claims(iat=NOW_S + 7200), "The Issued At value"),
        (good_claims(scope=7), "'scope' claim was not of type List"),
        (good_claims(exp=10**400), "out of range"),
    ],
)
def test_unsecured_invalid_tokens(claims: dict[str, Any], reason: str) -> None:
    validator = UnsecuredValidator()
    with pytest.raises(TokenError, match=reason) as info:
        validator.validate(unsecured(claims), NOW_MS)
    assert info.value.status == "invalid_token"


def test_unsecured_token_shape() -> None:
    validator = UnsecuredValidator()
    with pytest.raises(TokenError, match="'none' for an algorithm"):
        validator.validate(unsecured(good_claims(), {"alg": "HS256"}), NOW_MS)
    with pytest.raises(TokenError, match="must not contain a digital signature"):
        validator.validate(unsecured(good_claims()) + "c2ln", NOW_MS)
    with pytest.raises(TokenError, match=r"'\.\.'"):
        validator.validate("a..", NOW_MS)
    with pytest.raises(TokenError, match="3 dot-separated"):
        validator.validate("a.b", NOW_MS)
    with pytest.raises(TokenError, match="malformed"):
        validator.validate(f"{b64url({'alg': 'none'})}.{b64url(b'[1,2]')}.", NOW_MS)
    with pytest.raises(TokenError, match="malformed"):
        validator.validate(b64url({"alg": "none"}) + "." + b64url(b'{"sub": "a", "exp": NaN}') + ".", NOW_MS)


def test_missing_scope_sends_insufficient_scope() -> None:
    server = OAuthBearerServer(UnsecuredValidator(required_scope=("admin",)))
    step = server.evaluate(initial(unsecured(good_claims(scope="read"))), NOW_MS)
    assert isinstance(step, Failed)
    assert json.loads(step.challenge or b"") == {"status": "insufficient_scope", "scope": "admin"}
    assert "missing a required scope (admin)" in step.reason


def test_an_invalid_token_ends_with_kafkas_error_challenge() -> None:
    token = unsecured(good_claims(exp=NOW_S - 60))
    step = OAuthBearerServer(UnsecuredValidator()).evaluate(initial(token), NOW_MS)
    assert isinstance(step, Failed)
    assert step.challenge == b'{"status":"invalid_token"}'
    assert token not in step.reason


def test_authzid_must_be_the_principal() -> None:
    token = unsecured(good_claims())
    assert isinstance(OAuthBearerServer(UnsecuredValidator()).evaluate(initial(token, "alice"), NOW_MS), Complete)
    step = OAuthBearerServer(UnsecuredValidator()).evaluate(initial(token, "bob"), NOW_MS)
    assert isinstance(step, Failed) and step.user == "alice" and step.challenge is None


def test_unsecured_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        UnsecuredValidator(clock_skew_ms=-1)
    with pytest.raises(ValueError):
        UnsecuredValidator(principal_claim=" ")


# ---------------------------------------------------------------------- signed tokens against a JWKS


RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
EC384_KEY = ec.generate_private_key(ec.SECP384R1())
ED_KEY = ed25519.Ed25519PrivateKey.generate()
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(key: Any, kid: str, **extra: Any) -> dict[str, Any]:
    jwk: dict[str, Any] = json.loads(_to_jwk(key))
    return {**jwk, "kid": kid, **extra}


def _to_jwk(key: Any) -> str:
    if isinstance(key, rsa.RSAPrivateKey):
        return jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return jwt.algorithms.ECAlgorithm.to_jwk(key.public_key())
    return jwt.algorithms.OKPAlgorithm.to_jwk(key.public_key())


JWKS = {
    "keys": [
        public_jwk(RSA_KEY, "rsa-1"),
        public_jwk(EC_KEY, "ec-1"),
        public_jwk(EC384_KEY, "ec-384", alg="ES384"),
        public_jwk(ED_KEY, "ed-1"),
        {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},  # a shared secret: never used
        {**public_jwk(OTHER_RSA_KEY, "enc-1"), "use": "enc"},  # not for signatures
    ]
}


def signed(key: Any, alg: str, kid: str | None, **claims: Any) -> str:
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode({**good_claims(iss="https://issuer", aud="kafka"), **claims}, key, alg, headers=headers)


def validator(**options: Any) -> JwksValidator:
    return JwksValidator(JWKS, expected_issuer="https://issuer", expected_audience=("kafka", "other"), **options)


@pytest.mark.parametrize(
    ("key", "alg", "kid"),
    [
        (RSA_KEY, "RS256", "rsa-1"),
        (RSA_KEY, "RS512", "rsa-1"),
        (RSA_KEY, "PS256", "rsa-1"),
        (EC_KEY, "ES256", "ec-1"),
        (EC384_KEY, "ES384", "ec-384"),
        (ED_KEY, "EdDSA", "ed-1"),
        (EC_KEY, "ES256", None),  # no kid: any key that suits the algorithm
    ],
)
def test_signed_good_tokens(key: Any, alg: str, kid: str | None) -> None:
    token = signed(key, alg, kid, scope="read write")
    result = validator().validate(token, NOW_MS)
    assert result == ValidatedToken("alice", (NOW_S + 3600) * 1000, frozenset({"read", "write"}), (NOW_S - 10) * 1000)
    step = OAuthBearerServer(validator()).evaluate(initial(token), NOW_MS)
    assert step == Complete("alice", b"", (NOW_S + 3600) * 1000)


def test_audience_list_and_custom_sub_claim() -> None:
    token = signed(RSA_KEY, "RS256", "rsa-1", aud=["x", "other"], client_id=" svc ")
    assert validator(sub_claim="client_id").validate(token, NOW_MS).principal == "svc"
    token = signed(RSA_KEY, "RS256", "rsa-1", iss="elsewhere", aud="nobody")
    assert JwksValidator(JWKS).validate(token, NOW_MS).principal == "alice"  # nothing expected: not checked


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (signed(OTHER_RSA_KEY, "RS256", "rsa-1"), "signature is not valid"),  # wrong key
        (signed(RSA_KEY, "RS256", "nope"), "no key with this kid"),
        (signed(RSA_KEY, "RS256", "ec-1"), "no key suits the algorithm"),
        (signed(EC_KEY, "ES256", "ec-384"), "no key suits the algorithm"),  # the key says ES384
        (signed(RSA_KEY, "RS256", "rsa-1", iss="https://evil"), "issuer"),
        (signed(RSA_KEY, "RS256", "rsa-1", aud="someone-else"), "audience"),
        (signed(RSA_KEY, "RS256", "rsa-1", aud=None), "audience"),
        (signed(RSA_KEY, "RS256", "rsa-1", exp=NOW_S - 31), "expired"),
        (signed(RSA_KEY, "RS256", "rsa-1", exp=None), "Required claim missing: exp"),
        (signed(RSA_KEY, "RS256", "rsa-1", iat=None), "Required claim missing: iat"),
        (signed(RSA_KEY, "RS256", "rsa-1", iat=NOW_S + 31), "issued in the future"),
        (signed(RSA_KEY, "RS256", "rsa-1", nbf=NOW_S + 31), "not valid yet"),
        (signed(RSA_KEY, "RS256", "rsa-1", sub=None), "Required claim missing: sub"),
        (signed(b"c2VjcmV0-but-long-enough-for-hs256!!", "HS256", "hmac"), "algorithm is not allowed"),
        (jwt.encode(good_claims(iss="https://issuer", aud="kafka"), None, "none"), "not a signed JWT"),
        (unsecured(good_claims(iss="https://issuer", aud="kafka"), {"alg": "none", "kid": "rsa-1"}) + "x", "allowed"),
        ("a.b.c", "malformed"),
    ],
)
def test_signed_invalid_tokens(token: str, reason: str) -> None:
    with pytest.raises(TokenError, match=reason):
        validator().validate(token, NOW_MS)
    step = OAuthBearerServer(validator()).evaluate(initial(token), NOW_MS)
    assert isinstance(step, Failed) and step.challenge == b'{"status":"invalid_token"}'
    assert token not in step.reason


def test_signed_clock_skew() -> None:
    token = signed(RSA_KEY, "RS256", "rsa-1", exp=NOW_S - 29, nbf=NOW_S + 29, iat=NOW_S + 29)
    assert validator().validate(token, NOW_MS).principal == "alice"
    with pytest.raises(TokenError, match="expired"):
        validator(clock_skew_s=0).validate(token, NOW_MS)
    assert validator(require_iat=False).validate(signed(RSA_KEY, "RS256", "rsa-1", iat=None), NOW_MS)


@pytest.mark.parametrize(
    ("jwks", "reason"),
    [
        ({}, "no 'keys' list"),
        ({"keys": []}, "no key for verifying"),
        ({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}, "no key for verifying"),
        ({"keys": ["x"]}, "not an object"),
        ({"keys": [{"kty": "RSA", "n": "!!", "e": "AQAB"}]}, "not a valid key"),
        ({"keys": [{"kty": "EC", "crv": "P-999", "x": "AA", "y": "AA"}]}, "unsupported EC curve"),
        ({"keys": [{**public_jwk(RSA_KEY, "k"), "alg": "ES256"}]}, "does not suit"),
        ({"keys": [{**public_jwk(RSA_KEY, "k"), "alg": "HS256"}]}, "does not suit"),
    ],
)
def test_bad_jwks(jwks: dict[str, Any], reason: str) -> None:
    with pytest.raises(JwksError, match=reason):
        JwksValidator(jwks)


# ---------------------------------------------------------------------- no input raises


@settings(max_examples=200)
@given(st.binary(max_size=400))
def test_any_bytes_give_a_step(data: bytes) -> None:
    for v in (UnsecuredValidator(required_scope=("x",)), validator()):
        step = OAuthBearerServer(v).evaluate(data, NOW_MS)
        assert isinstance(step, Complete | Failed)


_TOKEN_CHARS = st.sampled_from([*"eyJ.-_=+/~aAzZ09", b64url({"alg": "none"}), b64url(good_claims())])


@given(st.lists(_TOKEN_CHARS, max_size=30).map("".join), st.integers(min_value=0, max_value=2**62))
def test_any_token_gives_a_step(token: str, now_ms: int) -> None:
    for v in (UnsecuredValidator(), validator()):
        step = OAuthBearerServer(v).evaluate(initial(token) if token else b"n,,\x01\x01", now_ms)
        assert isinstance(step, Complete | Failed)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.sampled_from(["sub", "exp", "iat", "nbf", "scope", "iss", "aud"]), _JSON), st.integers())
def test_any_claims_give_a_token_or_a_token_error(claims: dict[str, Any], now_ms: int) -> None:
    token = f"{b64url({'alg': 'none'})}.{b64url(claims)}."
    try:
        result = UnsecuredValidator().validate(token, now_ms)
    except TokenError:
        return
    assert result.principal == claims["sub"] and result.expires_ms > now_ms
