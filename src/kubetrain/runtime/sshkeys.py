"""The SSH key pair in the MPI plugin's ``<trainjob>-mpi-ssh-auth`` Secret (trainer v2.3.0 pkg/runtime/framework/plugins/mpi/mpi.go).

Upstream generates an ECDSA P-521 key once per TrainJob and stores the private key as PEM
``EC PRIVATE KEY`` (SEC 1, Go's ``x509.MarshalECPrivateKey``) and the public key as an
authorized_keys line (Go's ``ssh.MarshalAuthorizedKey``, which ends in a newline). The render
path must stay deterministic, so the key source is injectable: tests and golden renders pass a
fixed private key or derive one from a seed; only the controller asks for a fresh one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # cryptography is imported when a key is made: it is slow to import
    from cryptography.hazmat.primitives.asymmetric import ec

__all__ = [
    "SSHKeyPairSource",
    "generate_ssh_keypair",
    "ssh_keypair_from_seed",
]

# What the MPI plugin is handed: a callable returning (private PEM, public authorized_keys line).
SSHKeyPairSource = Callable[[], tuple[str, str]]

# Order of the P-521 group, to map a seed onto a valid private scalar in [1, n-1].
_P521_ORDER = int(
    "01FF"
    + "FFFFFFFF" * 7
    + "FFFFFFFA51868783BF2F966B7FCC0148F709A5D03BB5C9B8899C47AEBB6FB71E91386409",
    16,
)


def generate_ssh_keypair(
    private_key: ec.EllipticCurvePrivateKey | None = None,
) -> tuple[str, str]:
    """Return ``(private PEM, public authorized_keys line)`` for an ECDSA P-521 key.

    Without ``private_key`` a fresh key comes from the operating system's randomness; pass one
    to make the output reproducible. The PEM is ``-----BEGIN EC PRIVATE KEY-----`` (traditional
    OpenSSL/SEC 1, unencrypted) and the public line reads ``ecdsa-sha2-nistp521 AAAA...\\n``.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = private_key if private_key is not None else ec.generate_private_key(ec.SECP521R1())
    if not isinstance(key.curve, ec.SECP521R1):
        raise ValueError(f"the MPI SSH key must be on P-521, not {key.curve.name}")
    private_pem = key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.TraditionalOpenSSL,
        encryption_algorithm=serialization.NoEncryption(),
    ).decode("ascii")
    public_line = (
        key.public_key()
        .public_bytes(
            encoding=serialization.Encoding.OpenSSH,
            format=serialization.PublicFormat.OpenSSH,
        )
        .decode("ascii")
    )
    # Go's ssh.MarshalAuthorizedKey terminates the line; sshd accepts both, byte-equality needs it.
    return private_pem, public_line + "\n"


def ssh_keypair_from_seed(seed: bytes) -> tuple[str, str]:
    """A deterministic key pair for tests and golden renders: the same seed, the same keys.

    The private scalar is SHA-512 of the seed reduced into the group order; never use this for
    a job that runs anywhere but a test.
    """
    from cryptography.hazmat.primitives.asymmetric import ec

    digest = int.from_bytes(hashlib.sha512(b"kubetrain-mpi-ssh\x00" + seed).digest(), "big")
    scalar = digest % (_P521_ORDER - 1) + 1
    return generate_ssh_keypair(ec.derive_private_key(scalar, ec.SECP521R1()))
