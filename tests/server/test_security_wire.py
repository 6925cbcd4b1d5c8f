"""TLS and SASL on `regroup serve` at the wire: raw frames for what Kafka's broker does at each step of the
exchange (only ApiVersions and SaslHandshake before authentication, raw tokens after a v0 handshake, the
session lifetime of KIP-368 and the connection closed when it lapses, a failed exchange answered after the
delay and closed), and the server's log and data directory never holding a secret."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests.server.certs import Authority
from tests.server.conftest import ServerProcess, assert_clean_log, configured, free_port
from tests.server.wire import API_VERSIONS, WireClient

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-pw-7f3a" user_alice="alice-pw-91c2";'
)
NO_TOPICS = {
    "topics": [],
    "allow_auto_topic_creation": False,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}
SECRETS = ("admin-pw-7f3a", "alice-pw-91c2", "scram-pw-4d1e", "key-pw-55aa")


@pytest.fixture(scope="module")
def sasl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """SASL_PLAINTEXT with PLAIN and SCRAM-SHA-256/512 (a SCRAM user seeded before start), re-authentication
    every 1.5 s."""
    base = tmp_path_factory.mktemp("sasl")
    data = base / "data"
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        subprocess.run(
            [sys.executable, "-m", "regroup", "users", "add", "--data-dir", str(data), "--mechanism", mechanism,
             "--user", "carol", "--password", "scram-pw-4d1e"],
            check=True, capture_output=True,
        )  # fmt: skip
    port = free_port()
    proc = configured(
        base,
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}\n"
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorRequiredScope="kafka";\n'
        "connections.max.reauth.ms=1500\n",
        port,
    )
    try:
        yield proc
    finally:
        proc.kill()
    assert_clean_log(proc)
    for secret in SECRETS:
        assert secret not in proc.log()
        for path in data.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path


def plain_token(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


def test_only_api_versions_and_the_handshake_before_authentication(sasl_server: ServerProcess) -> None:
    with WireClient(sasl_server.port) as client:
        versions = client.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        assert versions.error_code == ErrorCode.none
        keys = {k.api_key for k in versions.api_keys}
        assert {SASL_HANDSHAKE, SASL_AUTHENTICATE} <= keys
        client.send(METADATA, 9, **NO_TOPICS)
        assert client.is_closed_by_server()


def test_unsupported_mechanism_is_answered_then_closed(sasl_server: ServerProcess) -> None:
    with WireClient(sasl_server.port) as client:
        response = client.call(SASL_HANDSHAKE, 1, mechanism="GSSAPI")
        assert response.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(response.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}
        assert client.is_closed_by_server()


def test_plain_with_headers_then_requests_and_a_session_lifetime(sasl_server: ServerProcess) -> None:
    with WireClient(sasl_server.port) as client:
        assert client.call(SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == ErrorCode.none
        response = client.call(SASL_AUTHENTICATE, 2, auth_bytes=plain_token("alice", "alice-pw-91c2"))
        assert response.error_code == ErrorCode.none
        assert 0 < response.session_lifetime.total_seconds() * 1000 <= 1500
        metadata = client.call(METADATA, 9, **NO_TOPICS)
        assert metadata.brokers[0].port == sasl_server.port
        time.sleep(1.7)  # the session lapses: the next request that is not a re-authentication closes
        client.send(METADATA, 9, **NO_TOPICS)
        assert client.is_closed_by_server()


def test_reauthentication_keeps_the_connection(sasl_server: ServerProcess) -> None:
    with WireClient(sasl_server.port) as client:
        for _ in range(2):
            assert client.call(SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == ErrorCode.none
            response = client.call(SASL_AUTHENTICATE, 1, auth_bytes=plain_token("alice", "alice-pw-91c2"))
            assert response.error_code == ErrorCode.none
            assert client.call(METADATA, 9, **NO_TOPICS).brokers
            time.sleep(1.0)
        # re-authenticating as someone else is refused
        assert client.call(SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == ErrorCode.none
        response = client.call(SASL_AUTHENTICATE, 1, auth_bytes=plain_token("admin", "admin-pw-7f3a"))
        assert response.error_code == ErrorCode.sasl_authentication_failed
        assert client.is_closed_by_server()


def test_a_wrong_password_fails_after_the_delay_and_is_logged_without_it(sasl_server: ServerProcess) -> None:
    with WireClient(sasl_server.port) as client:
        assert client.call(SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == ErrorCode.none
        started = time.monotonic()
        response = client.call(SASL_AUTHENTICATE, 1, auth_bytes=plain_token("alice", "not-her-password"))
        assert time.monotonic() - started >= 0.09
        assert response.error_code == ErrorCode.sasl_authentication_failed
        assert response.error_message
        assert client.is_closed_by_server()
    deadline = time.monotonic() + 5
    while "user='alice'" not in sasl_server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = [line for line in sasl_server.log().splitlines() if "authentication failed" in line]
    assert any("user='alice'" in line and " INFO " in line for line in lines), lines
    assert "not-her-password" not in sasl_server.log()


def test_handshake_v0_then_raw_tokens(sasl_server: ServerProcess) -> None:
    with WireClient(sasl_server.port) as client:
        assert client.call(SASL_HANDSHAKE, 0, mechanism="PLAIN").error_code == ErrorCode.none
        token = plain_token("admin", "admin-pw-7f3a")
        client.send_raw(struct.pack(">i", len(token)) + token)
        assert client.read_frame() == b""  # PLAIN's (empty) last message, raw
        assert client.call(METADATA, 9, **NO_TOPICS).brokers


def test_raw_token_failure_closes(sasl_server: ServerProcess) -> None:
    with WireClient(sasl_server.port) as client:
        assert client.call(SASL_HANDSHAKE, 0, mechanism="PLAIN").error_code == ErrorCode.none
        token = plain_token("admin", "wrong")
        client.send_raw(struct.pack(">i", len(token)) + token)
        assert client.is_closed_by_server()


def test_a_large_frame_before_authentication_closes(sasl_server: ServerProcess) -> None:
    with WireClient(sasl_server.port) as client:
        client.send_raw(struct.pack(">i", 1_000_000) + b"\0" * 64)
        assert client.is_closed_by_server()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_users_seeded_before_configured(sasl_server: ServerProcess, mechanism: str) -> None:
    kafka = pytest.importorskip("kafka")
    for password, ok in (("scram-pw-4d1e", True), ("wrong", False)):
        try:
            admin = kafka.KafkaAdminClient(
                bootstrap_servers=f"127.0.0.1:{sasl_server.port}",
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism=mechanism,
                sasl_plain_username="carol",
                sasl_plain_password=password,
                request_timeout_ms=5000,
            )
        except Exception as exc:
            assert not ok, exc
            continue
        assert ok
        try:
            assert admin.describe_cluster()["brokers"]
        finally:
            admin.close()


# ------------------------------------------------------------------------------------------ TLS
@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return Authority(tmp_path_factory.mktemp("ca"))


def tls_client(port: int, authority: Authority, cert: Path | None = None, key: Path | None = None) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(authority.cert))
    if cert is not None:
        context.load_cert_chain(cert, key)
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    return context.wrap_socket(raw, server_hostname="localhost")


def test_ssl_listener_with_an_encrypted_key_and_a_plaintext_one_beside_it(tmp_path: Path, authority: Authority) -> None:
    server = authority.server(key_password="key-pw-55aa")
    keystore = tmp_path / "keystore.pem"
    keystore.write_text(server.key_pem + server.cert_pem)
    ssl_port, plain_port = free_port(), free_port()
    proc = configured(
        tmp_path,
        f"listeners=SSL://127.0.0.1:{ssl_port},PLAINTEXT://127.0.0.1:{plain_port}\n"
        f"advertised.listeners=SSL://localhost:{ssl_port},PLAINTEXT://127.0.0.1:{plain_port}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore}\n"
        "ssl.key.password=key-pw-55aa\n",
        ssl_port,
    )
    try:
        with tls_client(ssl_port, authority) as sock:
            client = WireClient.over(sock)
            metadata = client.call(METADATA, 9, **NO_TOPICS)
            assert [(b.host, b.port) for b in metadata.brokers] == [("localhost", ssl_port)]
        with WireClient(plain_port) as client:
            metadata = client.call(METADATA, 9, **NO_TOPICS)
            assert [(b.host, b.port) for b in metadata.brokers] == [("127.0.0.1", plain_port)]
        other = Authority(tmp_path / "other", "another CA")
        with pytest.raises(ssl.SSLCertVerificationError):
            tls_client(ssl_port, other).close()
    finally:
        proc.kill()
    assert_clean_log(proc)
    assert "key-pw-55aa" not in proc.log()


def test_mutual_tls_requires_a_trusted_client_certificate(tmp_path: Path, authority: Authority) -> None:
    server = authority.server()
    port = free_port()
    proc = configured(
        tmp_path,
        f"listeners=SSL://127.0.0.1:{port}\n"
        f"ssl.keystore.certificate.chain={server.cert_pem.replace(chr(10), chr(92) + 'n')}\n"
        f"ssl.keystore.key={server.key_pem.replace(chr(10), chr(92) + 'n')}\n"
        f"ssl.truststore.location={authority.cert}\n"
        "ssl.truststore.type=PEM\n"
        "ssl.client.auth=required\n",
        port,
    )
    try:
        alice = authority.client("alice")
        with tls_client(port, authority, alice.cert, alice.key) as sock:
            client = WireClient.over(sock)
            assert client.call(METADATA, 9, **NO_TOPICS).brokers
        # no certificate, or one from an authority the server does not trust: the handshake fails
        other = Authority(tmp_path / "other", "another CA").client("mallory")
        for cert, key in ((None, None), (other.cert, other.key)):
            try:
                with tls_client(port, authority, cert, key) as sock:
                    sock.sendall(b"\0\0\0\0")
                    assert sock.recv(1) == b""
            except (ssl.SSLError, ConnectionError):
                pass
    finally:
        proc.kill()
    assert_clean_log(proc)


# ------------------------------------------------------------------------------ durability
ALTER_SCRAM, DESCRIBE_SCRAM, CREATE_ACLS, DESCRIBE_ACLS = 51, 50, 30, 29


def authenticated(port: int, user: str, password: str) -> WireClient:
    client = WireClient(port)
    assert client.call(SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == ErrorCode.none
    assert client.call(SASL_AUTHENTICATE, 2, auth_bytes=plain_token(user, password)).error_code == ErrorCode.none
    return client


def test_scram_users_and_acls_acknowledged_survive_kill_9(tmp_path: Path) -> None:
    from regroup.security.scram import SCRAM_SHA_512, salted_password

    port = free_port()
    proc = configured(
        tmp_path,
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n",
        port,
    )
    try:
        salt = b"0123456789abcdef"
        with authenticated(port, "admin", "admin-pw-7f3a") as admin:
            altered = admin.call(
                ALTER_SCRAM,
                0,
                deletions=[],
                upsertions=[
                    {
                        "name": "dave",
                        "mechanism": SCRAM_SHA_512.type_code,
                        "iterations": 4096,
                        "salt": salt,
                        "salted_password": salted_password(SCRAM_SHA_512, "scram-pw-4d1e", salt, 4096),
                    }
                ],
            )
            assert [r.error_code for r in altered.results] == [ErrorCode.none]
            created = admin.call(
                CREATE_ACLS,
                3,
                creations=[
                    {
                        "resource_type": 2,  # TOPIC
                        "resource_name": "orders-",
                        "resource_pattern_type": 4,  # PREFIXED
                        "principal": "User:dave",
                        "host": "*",
                        "operation": 3,  # READ
                        "permission_type": 3,  # ALLOW
                    }
                ],
            )
            assert [r.error_code for r in created.results] == [ErrorCode.none]
        proc.kill()  # SIGKILL
        proc.start()
        with authenticated(port, "admin", "admin-pw-7f3a") as admin:
            users = admin.call(DESCRIBE_SCRAM, 0, users=None)
            assert [(u.user, [(i.mechanism, i.iterations) for i in u.credential_infos]) for u in users.results] == [
                ("dave", [(SCRAM_SHA_512.type_code, 4096)])
            ]
            acls = admin.call(
                DESCRIBE_ACLS,
                3,
                resource_type_filter=1,  # ANY
                resource_name_filter=None,
                pattern_type_filter=1,
                principal_filter=None,
                host_filter=None,
                operation=1,
                permission_type=1,
            )
            assert [(r.resource_name, r.pattern_type, [a.principal for a in r.acls]) for r in acls.resources] == [
                ("orders-", 4, ["User:dave"])
            ]
    finally:
        proc.kill()
    assert_clean_log(proc)
    assert "scram-pw-4d1e" not in proc.log()


def unsecured_token(claims: dict[str, object]) -> bytes:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    token = f"{part({'alg': 'none'})}.{part(claims)}."
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def test_oauthbearer_rejection_with_a_huge_message_is_answered_and_closed(sasl_server: ServerProcess) -> None:
    """A token whose scope list is huge: the server's error challenge, then SASL_AUTHENTICATION_FAILED with a
    message short enough for every version (it quotes the scopes), then the connection closes."""
    scopes = " ".join(f"s{i}" for i in range(20_000))
    token = unsecured_token({"sub": "alice", "exp": time.time() + 60, "scope": scopes})
    with WireClient(sasl_server.port) as client:
        assert client.call(SASL_HANDSHAKE, 1, mechanism="OAUTHBEARER").error_code == ErrorCode.none
        challenge = client.call(SASL_AUTHENTICATE, 1, auth_bytes=token)
        assert challenge.error_code == ErrorCode.none
        assert json.loads(challenge.auth_bytes)["status"] == "insufficient_scope"
        failed = client.call(SASL_AUTHENTICATE, 1, auth_bytes=b"\x01")
        assert failed.error_code == ErrorCode.sasl_authentication_failed
        assert failed.error_message and len(failed.error_message) <= 1024
        assert client.is_closed_by_server()
    good = unsecured_token({"sub": "alice", "exp": time.time() + 60, "scope": "kafka"})
    with WireClient(sasl_server.port) as client:
        assert client.call(SASL_HANDSHAKE, 1, mechanism="OAUTHBEARER").error_code == ErrorCode.none
        response = client.call(SASL_AUTHENTICATE, 2, auth_bytes=good)
        assert response.error_code == ErrorCode.none
        assert 0 < response.session_lifetime.total_seconds() * 1000 <= 1500  # the shorter of max.reauth and exp
        assert client.call(METADATA, 9, **NO_TOPICS).brokers
