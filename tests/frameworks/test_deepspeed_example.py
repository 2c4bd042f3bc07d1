"""The DeepSpeed example trains for real across two pod sandboxes, on CPU.

A module of its own so that it sorts first in the ``host-port-29500`` xdist group (see
`frameworks_plane.HOST_PORT_29500`): it need not wait out the TIME-WAIT sockets XGBoost's
tracker leaves on that port.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from frameworks_plane import (
    HOST_PORT_29500,
    bwrap_usable,
    digests,
    example_job,
    port_holders,
    run_trainjob,
    wait_wildcard_port,
)

pytestmark = pytest.mark.skipif(
    not bwrap_usable(), reason="needs bubblewrap and /usr/sbin/sshd (openssh-server)"
)


@pytest.mark.slow
@HOST_PORT_29500
async def test_deepspeed_example_trains_on_cpu_across_two_pods(tmp_path: Path) -> None:
    pytest.importorskip("deepspeed")
    if not await asyncio.to_thread(wait_wildcard_port, 29500):
        pytest.skip(f"port 29500 stays taken by another process: {port_holders(29500)}")
    # DeepSpeed's store listens on 29500 of every address; its runtime declares no port.
    out = await run_trainjob(example_job("deepspeed"), tmp_path, timeout=120, serves={29500})
    launcher = out.log("launcher")
    assert out.results["deepspeed-launcher-0-0"].succeeded, launcher
    losses = [float(x) for x in re.findall(r"mean loss over 2 ranks ([\d.]+)", launcher)]
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert len(digests(launcher)) == 1 and launcher.count("weights digest") == 2
