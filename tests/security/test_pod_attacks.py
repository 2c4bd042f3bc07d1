"""Issue 13, findings 1 and 2, attacked from inside a real pod of the local engine.

One daemon, three small TrainJobs: ``reuse`` (its pod prints its own status token, then the
job is deleted), ``reuse`` again (the victim: a running job of the same name), and the
attacker, whose pod runs ``probe.py``: it tries to read the engine's secrets and other pods'
tokens, to forge the victim's progress with its own and with the deleted pod's token, and
to reach the admin API. The test then tries the last step of the original escape itself,
as the admin: a TrainJob with a ``hostPath`` volume.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from security_support import trainjob

from kubetrain.kube.client import ApiError, KubeClient
from kubetrain.kube.kinds import JOBSET, POD, TRAINJOB
from kubetrain.local.daemon import DaemonInfo
from kubetrain.local.sandbox import sandbox_mode
from polling import until

pytestmark = pytest.mark.skipif(
    sandbox_mode().mode != "bwrap",
    reason=f"plain mode protects nothing from pods (kubetrain doctor says so): {sandbox_mode().reason}",
)

PROBE = (Path(__file__).parent / "probe.py").read_text()
PRINT_TOKEN = "import os; print('TOKEN', open(os.environ['KUBEFLOW_TRAINER_SERVER_TOKEN']).read())"
RUN_A_WHILE = "import time; time.sleep(120)"


async def _pod(api: KubeClient, job: str, phases: tuple[str, ...]) -> dict[str, Any] | None:
    items, _ = await api.list(
        POD.api_version, POD.plural, label_selector=f"jobset.sigs.k8s.io/jobset-name={job}"
    )
    return next((p for p in items if (p.get("status") or {}).get("phase") in phases), None)


async def _log(api: KubeClient, home: Path, job: str, marker: str) -> str:
    async def line() -> str | None:
        pod = await _pod(api, job, ("Succeeded", "Failed"))
        if pod is None:
            return None
        text = (home / "logs" / "default" / pod["metadata"]["name"] / "node.log").read_text()
        found = [ln for ln in text.splitlines() if ln.startswith(marker)]
        assert found, text
        return found[-1].removeprefix(marker).strip()

    return str(await until(line, 120, "the line"))


async def test_findings_1_and_2_every_attack_from_inside_a_pod_is_refused(
    engine: tuple[Path, DaemonInfo], api: KubeClient
) -> None:
    home, info = engine
    await api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob("reuse", PRINT_TOKEN))
    old_token = await _log(api, home, "reuse", "TOKEN")
    await api.delete(TRAINJOB.api_version, TRAINJOB.plural, "reuse", namespace="default")

    async def gone() -> bool:
        for res in (TRAINJOB, JOBSET):
            try:
                await api.get(res.api_version, res.plural, "reuse", namespace="default")
            except ApiError:
                continue
            return False
        return await _pod(api, "reuse", ("Pending", "Running", "Succeeded", "Failed")) is None

    await until(gone, 120, "the pod to go")
    await api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob("reuse", RUN_A_WHILE))
    await until(lambda: _pod(api, "reuse", ("Running",)), 120, "the pod to run")

    secrets = sorted(
        str(p) for p in home.rglob("*")
        if p.is_file() and (p.name in ("token", "apiserver.token", "kubeconfig") or
                            p.suffix in (".key", ".db"))
    )  # fmt: skip
    assert {Path(s).name for s in secrets} >= {"apiserver.token", "apiserver.db", "ca.key", "token"}
    env = {
        "ENGINE_HOME": str(home), "SECRET_FILES": ":".join(secrets), "VICTIM": "reuse",
        "OLD_TOKEN": old_token, "API_URL": info.url,
    }  # fmt: skip
    await api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob("attacker", PROBE, **env))
    seen = json.loads(await _log(api, home, "attacker", "PROBE"))

    assert seen.pop("report own progress (control)") == 200
    for name in list(seen):
        if name.startswith("read "):
            assert seen.pop(name).startswith("refused"), f"{name}: the pod read it"
    assert seen.pop("find other pods' tokens") == []
    assert seen.pop("list the engine home") in ("absent", [])
    shown = seen.pop("list /root")
    assert all(entry == ".pyenv" for entry in shown), shown  # only the way to the interpreter
    assert seen == {
        "forge the victim's progress with own token": 403,
        "forge the victim's progress with a deleted pod's token": 403,
        "create a TrainJob with the pod's token": 401,
    }
    victim = await api.get(TRAINJOB.api_version, TRAINJOB.plural, "reuse", namespace="default")
    assert "trainerStatus" not in (victim.get("status") or {})


async def test_finding_1_a_host_path_job_is_refused_naming_the_path_and_the_setting(
    engine: tuple[Path, DaemonInfo], api: KubeClient
) -> None:
    home, info = engine
    job = trainjob("escape", "print('never')")
    job["spec"]["runtimePatches"] = [{"manager": "attacker", "trainingRuntimeSpec": {"template": {
        "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
            "spec": {"volumes": [{"name": "host", "hostPath": {"path": "/"}}]}}}}}]}}}}]  # fmt: skip
    url = f"{info.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
    async with httpx.AsyncClient(verify=False) as http:
        answer = await http.post(url, json=job, headers={"Authorization": f"Bearer {info.token}"})
    assert answer.status_code == 403, answer.text
    message = answer.json()["message"]
    assert "spec.runtimePatches[0]" in message and "hostPath.path: Forbidden: '/'" in message
    assert f"allowedHostPaths in {home / 'engine.yaml'}" in message
