"""A listener's TLS as an ``ssl.SSLContext``, from Kafka's ``ssl.*`` settings (``listeners.TlsSettings``).

Key stores: PEM (a file holding the private key and its certificate chain, ``ssl.keystore.location``, or the
PEM text of ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key``) with the key's passphrase in
``ssl.key.password``; or PKCS12 (``ssl.keystore.type=PKCS12``, its password ``ssl.keystore.password``), read
with ``cryptography``. Python's ``ssl`` loads a key and chain only from files, so PEM text and converted
PKCS12 stores are written to a private temporary file (mode 0600) that is removed as soon as they are loaded.
Trust stores: PEM (file or ``ssl.truststore.certificates`` text) or PKCS12.

``ssl.client.auth``: ``none`` asks for no certificate, ``requested`` verifies one if the client sends it,
``required`` refuses a handshake without a trusted one. ``ssl.enabled.protocols`` bounds the TLS versions
(TLSv1.2 and TLSv1.3), ``ssl.cipher.suites`` restricts the TLS 1.2 suites (OpenSSL's or IANA's names).

Anything wrong is a ``TlsConfigError`` with one line naming the setting, never a password or key.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path

from regroup.network.listeners import TlsSettings

__all__ = ["TlsConfigError", "server_context"]

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    """A listener's TLS settings cannot be used: one line, no secret."""


def server_context(settings: TlsSettings, listener: str) -> ssl.SSLContext:
    """The server-side context of ``listener``'s TLS."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(context, settings, listener)
    tls12 = [_openssl_cipher(name) for name in settings.cipher_suites if not _is_tls13_suite(name)]
    if tls12:  # (TLS 1.3's suites are OpenSSL's defaults and not set this way)
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise TlsConfigError(f"listener {listener}: ssl.cipher.suites names no cipher suite OpenSSL has") from None
    _load_key_store(context, settings, listener)
    mode = _CLIENT_AUTH.get(settings.client_auth.lower())
    if mode is None:
        raise TlsConfigError(f"listener {listener}: ssl.client.auth must be none, requested or required")
    if mode is not ssl.CERT_NONE:
        _load_trust_store(context, settings, listener)
    context.verify_mode = mode
    return context


def _set_versions(context: ssl.SSLContext, settings: TlsSettings, listener: str) -> None:
    versions = []
    for name in settings.enabled_protocols:
        version = _VERSIONS.get(name.strip())
        if version is None:
            raise TlsConfigError(
                f"listener {listener}: ssl.enabled.protocols: {name!r} is not supported (TLSv1.2, TLSv1.3)"
            )
        versions.append(version)
    if not versions:
        raise TlsConfigError(f"listener {listener}: ssl.enabled.protocols names no protocol")
    context.minimum_version, context.maximum_version = min(versions), max(versions)


def _is_tls13_suite(name: str) -> bool:
    return name.strip().startswith("TLS_") and "_WITH_" not in name


def _openssl_cipher(name: str) -> str:
    """OpenSSL's name of a TLS 1.2 cipher suite given by its IANA name, as Java names them
    (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` is ``ECDHE-RSA-AES128-GCM-SHA256``); OpenSSL's names pass."""
    iana = name.strip()
    if not (iana.startswith("TLS_") and "_WITH_" in iana):
        return iana
    exchange, _, bulk = iana[4:].partition("_WITH_")
    for long, short in (("AES_128", "AES128"), ("AES_256", "AES256"), ("CHACHA20_POLY1305", "CHACHA20-POLY1305")):
        bulk = bulk.replace(long, short)
    return "-".join([*exchange.split("_"), *bulk.split("_")])


def _load_key_store(context: ssl.SSLContext, settings: TlsSettings, listener: str) -> None:
    kind = settings.keystore_type.upper()
    try:
        if kind == "PKCS12":
            if settings.keystore_location is None:
                raise TlsConfigError(f"listener {listener}: ssl.keystore.type PKCS12 needs ssl.keystore.location")
            key_pem, chain_pem = _pkcs12_to_pem(settings.keystore_location, settings.keystore_password, listener)
            with _private_file(key_pem + chain_pem) as path:
                context.load_cert_chain(path)
            return
        if kind != "PEM":
            raise TlsConfigError(f"listener {listener}: ssl.keystore.type must be PEM or PKCS12 (JKS: convert it)")
        password = settings.key_password
        if settings.certificate_chain_pem is not None or settings.key_pem is not None:
            if not settings.certificate_chain_pem or not settings.key_pem:
                raise TlsConfigError(
                    f"listener {listener}: ssl.keystore.certificate.chain and ssl.keystore.key go together"
                )
            with _private_file(settings.key_pem + "\n" + settings.certificate_chain_pem) as path:
                context.load_cert_chain(path, password=password)
            return
        if settings.keystore_location is None:
            raise TlsConfigError(
                f"listener {listener}: a TLS listener needs a key store (ssl.keystore.location, or "
                "ssl.keystore.certificate.chain and ssl.keystore.key)"
            )
        context.load_cert_chain(settings.keystore_location, password=password)
    except ssl.SSLError as exc:
        raise TlsConfigError(
            f"listener {listener}: the key store cannot be loaded (a wrong ssl.key.password, or not a key and its "
            f"certificate chain): {exc.reason or 'SSL error'}"
        ) from None
    except OSError as exc:
        raise TlsConfigError(
            f"listener {listener}: cannot read the key store {exc.filename or ''}: {exc.strerror or exc}"
        ) from None


def _load_trust_store(context: ssl.SSLContext, settings: TlsSettings, listener: str) -> None:
    try:
        if settings.truststore_certificates_pem:
            context.load_verify_locations(cadata=settings.truststore_certificates_pem)
        elif settings.truststore_location is not None:
            if settings.truststore_type.upper() == "PKCS12":
                context.load_verify_locations(cadata=_pkcs12_certificates(settings.truststore_location, listener))
            else:
                context.load_verify_locations(cafile=settings.truststore_location)
        else:
            raise TlsConfigError(
                f"listener {listener}: ssl.client.auth {settings.client_auth} needs a trust store "
                "(ssl.truststore.location or ssl.truststore.certificates)"
            )
    except ssl.SSLError as exc:
        raise TlsConfigError(f"listener {listener}: the trust store cannot be loaded: {exc.reason or exc}") from None
    except OSError as exc:
        raise TlsConfigError(
            f"listener {listener}: cannot read the trust store {exc.filename or ''}: {exc.strerror or exc}"
        ) from None


def _pkcs12_to_pem(path: Path, password: str | None, listener: str) -> tuple[str, str]:
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12

    try:
        key, cert, extra = pkcs12.load_key_and_certificates(path.read_bytes(), (password or "").encode() or None)
    except ValueError:
        raise TlsConfigError(f"listener {listener}: the PKCS12 key store cannot be opened (its password?)") from None
    if key is None or cert is None:
        raise TlsConfigError(f"listener {listener}: the PKCS12 key store holds no key and certificate")
    key_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
    chain = "".join(c.public_bytes(Encoding.PEM).decode() for c in [cert, *extra])
    return key_pem, chain


def _pkcs12_certificates(path: Path, listener: str) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    try:
        store = pkcs12.load_pkcs12(path.read_bytes(), None)
    except ValueError:
        raise TlsConfigError(f"listener {listener}: the PKCS12 trust store cannot be opened") from None
    certs = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certs.append(store.cert.certificate)
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[str]:
    """A file only this user can read holding ``text``, removed on exit."""
    fd, name = tempfile.mkstemp(prefix="regroup-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        yield name
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
