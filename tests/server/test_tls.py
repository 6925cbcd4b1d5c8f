"""A listener's TLS context from Kafka's ssl.* settings: key stores (PEM file, PEM text, encrypted key, PKCS12),
trust stores, client authentication, protocol versions and cipher suites — each checked with a real handshake
over a socket pair — and the one-line errors that never show a password."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, load_pem_private_key, pkcs12
from cryptography.x509 import load_pem_x509_certificates

from regroup.network.listeners import TlsSettings
from regroup.network.tls import TlsConfigError, server_context
from tests.server.certs import Authority


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return Authority(tmp_path_factory.mktemp("tls-ca"))


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[str | None, str | None]:
    """(the TLS version negotiated or None, the server's error or None) of one handshake."""
    left, right = socket.socketpair()
    outcome: dict[str, str | None] = {"error": None}

    def serve() -> None:
        try:
            with server.wrap_socket(left, server_side=True) as tls:
                tls.sendall(b"x")
        except (ssl.SSLError, OSError) as exc:
            outcome["error"] = type(exc).__name__

    thread = threading.Thread(target=serve)
    thread.start()
    version = None
    try:
        with client.wrap_socket(right, server_hostname="localhost") as tls:
            tls.recv(1)
            version = tls.version()
    except (ssl.SSLError, OSError):
        pass
    thread.join(5)
    return version, outcome["error"]


def client_context(authority: Authority) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(authority.cert))


def test_pem_file_with_an_encrypted_key(tmp_path: Path, authority: Authority) -> None:
    issued = authority.server(key_password="s3cret-key")
    keystore = tmp_path / "store.pem"
    keystore.write_text(issued.key_pem + issued.cert_pem)
    context = server_context(TlsSettings(keystore_location=keystore, key_password="s3cret-key"), "SSL")
    assert handshake(context, client_context(authority))[0] in ("TLSv1.2", "TLSv1.3")
    with pytest.raises(TlsConfigError) as refused:
        server_context(TlsSettings(keystore_location=keystore, key_password="wrong-one"), "SSL")
    assert "wrong-one" not in str(refused.value) and "\n" not in str(refused.value)


def test_pem_text_and_pkcs12(tmp_path: Path, authority: Authority) -> None:
    issued = authority.server()
    from_text = server_context(TlsSettings(certificate_chain_pem=issued.cert_pem, key_pem=issued.key_pem), "SSL")
    assert handshake(from_text, client_context(authority))[0]
    key = load_pem_private_key(issued.key_pem.encode(), None)
    cert, *chain = load_pem_x509_certificates(issued.cert_pem.encode())
    store = tmp_path / "store.p12"
    store.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"server",
            key,
            cert,
            chain,
            BestAvailableEncryption(b"p12-pass"),
        )
    )
    from_p12 = server_context(
        TlsSettings(keystore_type="PKCS12", keystore_location=store, keystore_password="p12-pass"), "SSL"
    )
    assert handshake(from_p12, client_context(authority))[0]
    with pytest.raises(TlsConfigError):
        server_context(TlsSettings(keystore_type="PKCS12", keystore_location=store, keystore_password="no"), "SSL")


def test_protocol_versions_and_cipher_suites(authority: Authority) -> None:
    issued = authority.server()
    base = {"certificate_chain_pem": issued.cert_pem, "key_pem": issued.key_pem}
    only_13 = server_context(TlsSettings(enabled_protocols=("TLSv1.3",), **base), "SSL")
    client_12 = client_context(authority)
    client_12.maximum_version = ssl.TLSVersion.TLSv1_2
    assert handshake(only_13, client_12)[0] is None
    assert handshake(only_13, client_context(authority))[0] == "TLSv1.3"
    one_suite = server_context(
        TlsSettings(enabled_protocols=("TLSv1.2",), cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",), **base),
        "SSL",
    )
    client = client_context(authority)
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    client.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")
    assert handshake(one_suite, client)[0] is None
    client.set_ciphers("ECDHE-ECDSA-AES256-GCM-SHA384")
    assert handshake(one_suite, client)[0] == "TLSv1.2"
    with pytest.raises(TlsConfigError):
        server_context(TlsSettings(enabled_protocols=("TLSv1",), **base), "SSL")
    with pytest.raises(TlsConfigError):
        server_context(TlsSettings(cipher_suites=("NO_SUCH_SUITE",), **base), "SSL")


@pytest.mark.parametrize("mode", ["requested", "required"])
def test_client_authentication(tmp_path: Path, authority: Authority, mode: str) -> None:
    issued = authority.server()
    context = server_context(
        TlsSettings(
            certificate_chain_pem=issued.cert_pem,
            key_pem=issued.key_pem,
            truststore_location=authority.cert,
            client_auth=mode,
        ),
        "SSL",
    )
    alice = authority.client("alice")
    with_cert = client_context(authority)
    with_cert.load_cert_chain(alice.cert, alice.key)
    assert handshake(context, with_cert)[0]
    without = handshake(context, client_context(authority))
    assert (without[0] is None) == (mode == "required")
    stranger = Authority(tmp_path / "other", "another CA").client("mallory")
    untrusted = client_context(authority)
    untrusted.load_cert_chain(stranger.cert, stranger.key)
    assert handshake(context, untrusted)[0] is None
    with pytest.raises(TlsConfigError):  # client authentication needs a trust store
        server_context(
            TlsSettings(certificate_chain_pem=issued.cert_pem, key_pem=issued.key_pem, client_auth=mode), "X"
        )


def test_a_tls_listener_needs_a_key_store() -> None:
    with pytest.raises(TlsConfigError, match="key store"):
        server_context(TlsSettings(), "SSL")
