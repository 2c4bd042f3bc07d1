"""A private CA and a loopback serving certificate, kept in ``KUBETRAIN_HOME``.

TLS is not optional for kubectl: client-go reads a kubeconfig's credentials only when the
server URL is ``https``, so bearer-token auth needs it. The CA signs one certificate for
``127.0.0.1``, ``::1`` and ``localhost``; the kubeconfig carries the CA.
"""

from __future__ import annotations

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


def ensure_serving_cert(folder: Path) -> ServingCert:
    """Reuse the CA and certificate in ``folder`` when present, else make them (valid 10 years).

    The certificates themselves come from ``kubetrain.controller.pki``, which also serves the
    status and webhook servers: one way to make a CA and a serving certificate.
    """
    # Imported here: cryptography is only needed when a server starts.
    from kubetrain.controller.pki import ensure_serving_cert as make

    # Pods on the pod network reach this server as kubernetes.default.svc, as in a cluster.
    names = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
             "kubernetes.default.svc.cluster.local"]  # fmt: skip
    cert = make(folder, names, ["127.0.0.1", "::1"])
    return ServingCert(cert.ca_pem.encode(), cert.cert_file, cert.key_file)
