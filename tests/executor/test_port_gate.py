"""Without a pod network, pods share the host's ports: when the gate lets a pod have one.

A pod's process may bind its own address or every address (torch's store binds ``*:29500``),
so a declared port is free only when both can be bound. The cases are the sockets an earlier
job leaves on the port at another loopback address.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import pytest

from kubetrain.local.executor.ports import WILDCARD, PortGate, port_is_free

POD_IP = "127.0.0.5"
OTHER = "127.0.0.9"  # an earlier job's pod address

# Each case's port lies below the kernel's ephemeral range (32768 and up here): a port the
# kernel hands out (to another test's outgoing connection or port-0 listener) could take it
# between the case's set-up and its checks, and the wildcard probe would then fail. The cases
# run on one worker, so they never pick the same port at once either.
pytestmark = pytest.mark.xdist_group("port-gate")
_FIRST, _LAST = 11_000, 19_999  # no port the project or its tests name explicitly


def _unclaimed_port() -> int:
    for port in random.sample(range(_FIRST, _LAST + 1), 200):
        if port_is_free(OTHER, port) and port_is_free(WILDCARD, port):
            return port
    raise AssertionError(f"no free port between {_FIRST} and {_LAST}")


def _listener(stack: ExitStack, *, reuse: bool) -> socket.socket:
    server = stack.enter_context(socket.socket())
    if reuse:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((OTHER, _unclaimed_port()))
    server.listen()
    return server


def nothing(stack: ExitStack) -> int:
    return _unclaimed_port()


def a_listener(stack: ExitStack) -> int:
    return int(_listener(stack, reuse=True).getsockname()[1])


def _closed_first(stack: ExitStack, *, reuse: bool) -> int:
    """A port whose listener accepted a connection and closed it before the client did: the
    server's end stays in TIME_WAIT (60 s) on ``OTHER``, as XGBoost's tracker leaves 29500."""
    server = _listener(stack, reuse=reuse)
    port = int(server.getsockname()[1])
    client = socket.create_connection((OTHER, port))
    conn, _ = server.accept()
    conn.close()
    client.close()
    server.close()
    return port


def closed_without_reuse(stack: ExitStack) -> int:
    return _closed_first(stack, reuse=False)


def closed_with_reuse(stack: ExitStack) -> int:
    return _closed_first(stack, reuse=True)


@pytest.mark.parametrize(
    ("leftover", "free"),
    [
        pytest.param(nothing, True, id="a port nothing uses is free"),
        pytest.param(a_listener, False, id="a listener on another address takes the port"),
        pytest.param(closed_without_reuse, False,
                     id="connections closed by a listener without SO_REUSEADDR take it while in TIME_WAIT"),
        pytest.param(closed_with_reuse, True,
                     id="connections closed by a listener with SO_REUSEADDR leave it free"),
    ],
)  # fmt: skip
def test_a_pod_gets_its_declared_port_only_when_every_address_could_bind_it(
    tmp_path: Path, leftover: Callable[[ExitStack], int], free: bool
) -> None:
    with ExitStack() as stack:
        port = leftover(stack)
        # The pod's own address is free in every case: only the wildcard tells them apart.
        assert port_is_free(POD_IP, port)
        assert port_is_free(WILDCARD, port) is free
        gate = PortGate(tmp_path / "locks")
        stack.callback(gate.close)
        why = gate.blocked("uid-1", [port], POD_IP)
        if free:
            assert why is None
        else:
            assert why == (
                f"port {port} is in use by another process on this machine (a listener, or "
                "closed connections in TCP TIME_WAIT); waiting for it to be free"
            )
