"""A private CA and a loopback serving certificate, kept in ``KUBETRAIN_HOME``.

TLS is not optional for kubectl: client-go reads a kubeconfig's credentials only when the
server URL is ``https``, so bearer-token auth needs it. The CA signs one certificate for
``127.0.0.1``, ``::1`` and ``localhost``; the kubeconfig carries the CA.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ServingCert", "ensure_serving_cert"]


@dataclass(frozen=True, slots=True)
class ServingCert:
    ca_pem: bytes
    cert_path: Path
    key_path: Path

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(str(self.cert_path), str(self.key_path))
        return ctx


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def ensure_serving_cert(folder: Path) -> ServingCert:
    """Reuse the CA and certificate in ``folder`` when present, else make them (valid 10 years)."""
    ca_path, cert_path, key_path = (
        folder / "ca.crt",
        folder / "apiserver.crt",
        folder / "apiserver.key",
    )
    if ca_path.exists() and cert_path.exists() and key_path.exists():
        return ServingCert(ca_path.read_bytes(), cert_path, key_path)
    # Imported here: cryptography is only needed the first time a home is set up.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=3650)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubetrain-local-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubetrain-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write(key_path, key_pem, 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(ca_path, ca_pem, 0o644)
    return ServingCert(ca_pem, cert_path, key_path)
