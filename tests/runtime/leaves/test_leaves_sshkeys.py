"""The MPI SSH key pair (trainer v2.3.0 pkg/runtime/framework/plugins/mpi/mpi.go): ECDSA P-521, SEC 1 PEM, authorized_keys line."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubetrain.runtime.sshkeys import generate_ssh_keypair, ssh_keypair_from_seed


def test_a_fresh_key_loads_back_and_its_public_line_matches() -> None:
    private_pem, public_line = generate_ssh_keypair()
    assert private_pem.startswith("-----BEGIN EC PRIVATE KEY-----\n")
    assert private_pem.endswith("-----END EC PRIVATE KEY-----\n")
    key = serialization.load_pem_private_key(private_pem.encode(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert isinstance(key.curve, ec.SECP521R1)
    assert public_line.startswith("ecdsa-sha2-nistp521 AAAA")
    assert public_line.endswith("\n") and public_line.count("\n") == 1
    loaded_public = serialization.load_ssh_public_key(public_line.strip().encode())
    assert loaded_public == key.public_key()


def test_two_fresh_keys_differ() -> None:
    assert generate_ssh_keypair()[0] != generate_ssh_keypair()[0]


def test_an_injected_key_gives_the_same_output_every_time() -> None:
    key = ec.generate_private_key(ec.SECP521R1())
    assert generate_ssh_keypair(key) == generate_ssh_keypair(key)


def test_a_seed_gives_a_stable_valid_pair() -> None:
    first = ssh_keypair_from_seed(b"job-uid")
    assert first == ssh_keypair_from_seed(b"job-uid")
    assert first != ssh_keypair_from_seed(b"other-uid")
    key = serialization.load_pem_private_key(first[0].encode(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert serialization.load_ssh_public_key(first[1].encode()) == key.public_key()


def test_a_key_on_another_curve_is_refused() -> None:
    import pytest

    with pytest.raises(ValueError, match="P-521"):
        generate_ssh_keypair(ec.generate_private_key(ec.SECP256R1()))
