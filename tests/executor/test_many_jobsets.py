"""Issue 13, finding 10: deleting many suspended jobs one by one (``kubectl delete trainjobs
--all``) costs time in proportion to their number, not to its square.

Each JobSet's removal used to make the executor recompute every pod's DNS names from every
JobSet, in the event loop the API server shares: 800 suspended JobSets took 74 s to delete on
a loaded 2-core machine, now 3.5 s there. Half as many show it as well: the bound halves with
the count (linear), while the quadratic cost falls only to a quarter (about 18 s, over twice the
bound). The bound is generous.
"""

from __future__ import annotations

import time

from plane_helpers import PY, Plane, make_jobset

from kubetrain.kube.kinds import JOBSET

MANY = 400
BOUND_S = 7.5  # 15 s for 800, scaled linearly


async def test_finding_10_deleting_400_suspended_jobsets_one_by_one_takes_seconds(
    plane: Plane,
) -> None:
    names = [f"held-{i:03d}" for i in range(MANY)]
    for name in names:
        await plane.api.create(
            JOBSET.api_version, JOBSET.plural, make_jobset(name, [PY, "-c", "pass"], suspend=True)
        )

    async def all_seen() -> bool:
        return len(plane.executor.cluster.jobsets) == MANY

    await plane.wait_for(all_seen, timeout=60)
    start = time.monotonic()
    for name in names:
        await plane.api.delete(JOBSET.api_version, JOBSET.plural, name, namespace="default")

    async def all_gone() -> bool:
        return (
            not plane.executor.cluster.jobsets
            and not (await plane.api.list(JOBSET.api_version, JOBSET.plural))[0]
        )

    await plane.wait_for(all_gone, timeout=60)
    took = time.monotonic() - start
    assert took < BOUND_S, f"deleting {MANY} suspended JobSets took {took:.1f}s"
