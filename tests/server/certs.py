"""Certificates made by the tests: a certificate authority, a server certificate for 127.0.0.1 and localhost,
client certificates with chosen subjects, and a second, untrusted authority. PEM files, keys optionally
encrypted."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path
    cert_pem: str
    key_pem: str


class Authority:
    """A self-signed CA that issues server and client certificates into ``directory``."""

    def __init__(self, directory: Path, name: str = "regroup test CA") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM).decode()
        self.cert = directory / f"{name.replace(' ', '-')}.pem"
        self.cert.write_text(self.cert_pem)

    def issue(
        self,
        file_name: str,
        subject: list[tuple[x509.ObjectIdentifier, str]],
        *,
        server: bool = False,
        key_password: str | None = None,
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(oid, value) for oid, value in subject]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        else:
            builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(key_password.encode())
            if key_password
            else serialization.NoEncryption()
        )
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption).decode()
        cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
        cert_path, key_path = self.directory / f"{file_name}.crt", self.directory / f"{file_name}.key"
        cert_path.write_text(cert_pem + self.cert_pem)
        key_path.write_text(key_pem)
        return Issued(cert_path, key_path, cert_pem + self.cert_pem, key_pem)

    def server(self, key_password: str | None = None) -> Issued:
        return self.issue("server", [(NameOID.COMMON_NAME, "localhost")], server=True, key_password=key_password)

    def client(self, name: str, organization: str = "regroup") -> Issued:
        return self.issue(
            f"client-{name}",
            [(NameOID.COUNTRY_NAME, "US"), (NameOID.ORGANIZATION_NAME, organization), (NameOID.COMMON_NAME, name)],
        )
