"""A private CA and a broker certificate for the local broker's TLS listener, as PEM files.

Made with the `cryptography` package at the broker's first secured start, so that `hub kafka
start --sasl-ssl` and the tests run a TLS listener with nothing to install or download, and
clients verify it exactly as they verify a production cluster: against a CA file
(`HUB_KAFKA_SSL_CA_LOCATION`), with the host name checked. Keys stay unencrypted PKCS#8 in
files only the owner can read; the broker takes its key inline (see `LocalBroker`).
"""

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID_FOR = datetime.timedelta(days=825)  # the longest validity clients commonly accept


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Where a CA and the certificate it signed are kept."""

    ca_certificate: Path
    ca_key: Path
    certificate: Path
    key: Path

    @classmethod
    def under(cls, folder: Path, *, name: str = "broker") -> "TlsFiles":
        return cls(
            ca_certificate=folder / "ca.pem",
            ca_key=folder / "ca-key.pem",
            certificate=folder / f"{name}.pem",
            key=folder / f"{name}-key.pem",
        )

    def exist(self) -> bool:
        return all(
            p.is_file() for p in (self.ca_certificate, self.ca_key, self.certificate, self.key)
        )


def make_certificates(files: TlsFiles, *, common_name: str = "Integration Hub local CA") -> None:
    """Write a new CA and a server certificate for `localhost` and `127.0.0.1` signed by it."""
    files.ca_certificate.parent.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    certificate = (
        _builder(subject, ca_name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write(files.ca_key, _private_pem(ca_key), private=True)
    _write(files.key, _private_pem(key), private=True)
    _write(files.ca_certificate, ca.public_bytes(serialization.Encoding.PEM), private=False)
    _write(files.certificate, certificate.public_bytes(serialization.Encoding.PEM), private=False)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # tolerate small clock skew
        .not_valid_after(now + _VALID_FOR)
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=not ca,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, *, private: bool) -> None:
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600 if private else 0o644)
    with os.fdopen(descriptor, "wb") as out:
        out.write(data)
