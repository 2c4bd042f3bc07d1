"""Self-managed certificates: one CA per control plane, serving certificates signed by it.

The status server (and, on a cluster, the webhook server) serve TLS with a certificate for the
manager Service's DNS names; pods verify it with the CA that the TrainJobStatus plugin copies
into ``<trainjob>-tls-config``. Keys are EC P-256: small and fast to create.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["ServingCert", "ensure_serving_cert", "service_dns_names"]

CA_NAME = "kubeflow-trainer-ca"  # upstream's CA common name
VALIDITY = dt.timedelta(days=3650)


@dataclass(frozen=True)
class ServingCert:
    """Paths of a serving certificate and key, and the PEM of the CA that signed them."""

    cert_file: Path
    key_file: Path
    ca_pem: str

    def server_context(self) -> ssl.SSLContext:
        """A TLS server context for this certificate (TLS 1.2+, ALPN ``http/1.1`` as upstream)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(["http/1.1"])
        return context


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names a Service answers to inside a cluster, shortest first."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write_private(path: Path, data: bytes) -> None:
    # Created 0600 from the start (never readable by others, not even for a moment), and
    # renamed into place so a reader never sees half a key.
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(scratch, path)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def ensure_serving_cert(
    directory: Path, dns_names: list[str], ip_addresses: list[str]
) -> ServingCert:
    """Create (once) a CA and a serving certificate for ``dns_names``/``ip_addresses`` in ``directory``.

    Existing files are reused when they cover the same names, so pods keep trusting the CA
    across restarts of the control plane.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert_file, ca_key_file = directory / "ca.crt", directory / "ca.key"
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    now = dt.datetime.now(dt.UTC)

    if ca_cert_file.exists() and ca_key_file.exists():
        ca_cert = x509.load_pem_x509_certificate(ca_cert_file.read_bytes())
        ca_key = serialization.load_pem_private_key(ca_key_file.read_bytes(), password=None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name(CA_NAME))
            .issuer_name(_name(CA_NAME))
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        _write_private(ca_key_file, _key_pem(ca_key))
        ca_cert_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

    wanted = set(dns_names) | set(ip_addresses)
    if cert_file.exists() and key_file.exists():
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        try:
            san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            have = {str(n) for n in san.get_values_for_type(x509.DNSName)} | {
                str(ip) for ip in san.get_values_for_type(x509.IPAddress)
            }
        except x509.ExtensionNotFound:
            have = set()
        if have == wanted and cert.issuer == ca_cert.subject and cert.not_valid_after_utc > now:
            return ServingCert(cert_file, key_file, ca_cert_file.read_text())

    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(dns_names[0] if dns_names else "kubetrain"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write_private(key_file, _key_pem(key))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return ServingCert(cert_file, key_file, ca_cert_file.read_text())
