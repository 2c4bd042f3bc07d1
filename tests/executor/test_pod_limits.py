"""resources.limits enforced as a kubelet enforces them: cgroups for memory and cpu.

Runs where the engine can write the machine's cgroups (root, or a delegated v2 tree);
elsewhere each test skips with the reason `kubetrain doctor` gives too.
"""

from __future__ import annotations

from typing import Any

import pytest
from plane_helpers import PY, Plane, make_jobset

from kubetrain.kube.kinds import JOBSET
from kubetrain.local.sandbox import cgroup_probe

pytestmark = [
    pytest.mark.filterwarnings("ignore:shutdown_timeout should be set:DeprecationWarning"),
    pytest.mark.skipif(cgroup_probe().tree is None, reason=cgroup_probe().reason),
]


def _limited(js: dict[str, Any], limits: dict[str, str]) -> dict[str, Any]:
    for rj in js["spec"]["replicatedJobs"]:
        for c in rj["template"]["spec"]["template"]["spec"]["containers"]:
            c["resources"] = {"limits": limits}
    return js


async def test_a_container_over_its_memory_limit_is_oom_killed_with_exit_code_137(
    plane: Plane,
) -> None:
    # Touches 512 MB (a str is written, not just reserved) under a 64Mi limit.
    hog = [PY, "-c", "x = ' ' * (512 * 1024 * 1024); print('survived')"]
    await plane.api.create(
        JOBSET.api_version,
        JOBSET.plural,
        _limited(make_jobset("hog", hog, pods=1), {"memory": "64Mi"}),
    )
    done = await plane.terminal("hog", timeout=60)
    assert done["status"]["terminalState"] == "Failed"
    [pod] = await plane.pods("hog")
    assert pod["status"]["phase"] == "Failed"
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("OOMKilled", 137)


async def test_the_limits_are_the_containers_own_cgroup_settings(plane: Plane) -> None:
    # The container reads its own cgroup's limits (cgroup v1 or v2 file names).
    script = """
import pathlib
lines = pathlib.Path('/proc/self/cgroup').read_text().splitlines()
paths = {c: p for _, cs, p in (l.split(':', 2) for l in lines) for c in cs.split(',')}
root = pathlib.Path('/sys/fs/cgroup')
if '' in paths and not (root / 'memory').is_dir():
    d = root / paths[''].lstrip('/')
    print((d / 'memory.max').read_text().strip(), (d / 'cpu.max').read_text().split()[0])
else:
    mem = root / 'memory' / paths['memory'].lstrip('/')
    cpu = root / 'cpu' / paths['cpu'].lstrip('/')
    print((mem / 'memory.limit_in_bytes').read_text().strip(),
          (cpu / 'cpu.cfs_quota_us').read_text().strip())
"""
    js = _limited(
        make_jobset("capped", [PY, "-c", script], pods=1), {"memory": "96Mi", "cpu": "250m"}
    )
    await plane.api.create(JOBSET.api_version, JOBSET.plural, js)
    done = await plane.terminal("capped", timeout=60)
    [pod] = await plane.pods("capped")
    log = (plane.home / "logs" / "default" / pod["metadata"]["name"] / "node.log").read_text()
    assert done["status"]["terminalState"] == "Completed", log
    assert log.split() == [str(96 * 1024 * 1024), "25000"]
