"""Issue 13, the fuzz test's end-to-end half: a sampled handful of generated TrainJobs on the
real local engine. Each is refused by the API server with a Status naming a field, or
reaches a Complete or Failed condition within 30 s: never a hang without a condition. (The
pure half, hundreds of inputs, is tests/runtime/test_fuzz_bounds.py.)"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from security_support import trainjob

from kubetrain.kube.client import ApiError, connect
from kubetrain.kube.kinds import TRAINJOB
from kubetrain.local.daemon import DaemonInfo

_serial = itertools.count()

names = st.one_of(
    st.from_regex(r"[a-z][-a-z0-9]{0,8}[a-z0-9]", fullmatch=True),
    st.integers(50, 70).map(lambda n: "z" * n),
    st.sampled_from(["Bad_Name", "-dash", "a.b"]),
)
counts = st.one_of(st.integers(1, 2), st.sampled_from([0, -1, 2**31, 10**20, 1001]))
codes = st.sampled_from(["pass", "raise SystemExit(3)", "print('$(HOME) $$ ok')"])


async def _outcome(info: DaemonInfo, job: dict[str, Any]) -> str:
    api = connect(info.kubeconfig)
    try:
        try:
            await api.create(TRAINJOB.api_version, TRAINJOB.plural, job)
        except ApiError as err:
            assert 400 <= err.code < 500 and err.message, err
            return "refused"
        name = job["metadata"]["name"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            obj = await api.get(TRAINJOB.api_version, TRAINJOB.plural, name, namespace="default")
            conds = (obj.get("status") or {}).get("conditions") or []
            ended = [
                c["type"]
                for c in conds
                if c["status"] == "True" and c["type"] in ("Complete", "Failed")
            ]
            if ended:
                return ended[0]
            await asyncio.sleep(0.2)
        raise AssertionError(f"{name}: no Complete or Failed condition within 30 s: {conds}")
    finally:
        await api.close()


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(name=names, nodes=counts, procs=st.one_of(st.none(), counts), code=codes)
@example(name="runs", nodes=2, procs=None, code="print('$(HOME) $$ ok')")  # Complete
@example(name="exits", nodes=1, procs=1, code="raise SystemExit(3)")  # Failed
def test_a_sample_of_generated_trainjobs_is_refused_or_reaches_a_condition(
    engine: tuple[Path, DaemonInfo], name: str, nodes: int, procs: int | None, code: str
) -> None:
    job = trainjob(f"{name}{next(_serial)}", code)
    job["spec"]["trainer"]["numNodes"] = nodes
    if procs is not None:
        job["spec"]["trainer"]["numProcPerNode"] = procs
    assert asyncio.run(_outcome(engine[1], job)) in ("refused", "Complete", "Failed")
