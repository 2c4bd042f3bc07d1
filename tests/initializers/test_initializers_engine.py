"""The initializers on the local engine, end to end: the example TrainJob through the daemon
(API server + controller + executor), its initializer pods fetching from a real S3 server,
then 2 torch nodes training from what they fetched; and the failures users make, each ending
the TrainJob with the URI and the cause in its status."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from initializers_support import EXAMPLE

from kubetrain.kube.client import KubeClient, connect
from kubetrain.kube.kinds import POD, TRAINING_RUNTIME, TRAINJOB
from kubetrain.local.daemon import ensure_daemon, stop_daemon
from kubetrain.local.sandbox import ContainerProcess, sandbox_mode
from kubetrain.local.sandbox.state import read_states
from kubetrain.testing.s3 import S3Server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sandbox_mode().mode != "bwrap", reason="needs bubblewrap"),
]

# The example trains 8 epochs; 3 show the loss falling (it halves in the first).
EPOCHS = 3


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "home"
    try:
        yield path
    finally:
        stop_daemon(path, kill_pods=True, timeout=10)


def _example(s3: S3Server, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    runtime = yaml.safe_load((EXAMPLE / "runtime.yaml").read_text())
    runtime["metadata"]["namespace"] = "default"
    job = yaml.safe_load((EXAMPLE / "trainjob.yaml").read_text())
    job["metadata"].update(name=name, namespace="default")
    values = {
        "ENDPOINT": s3.pod_endpoint,
        "ACCESS_KEY_ID": s3.access_key_id,
        "SECRET_ACCESS_KEY": s3.secret_access_key,
    }
    for source in job["spec"]["initializer"].values():
        for env in source["env"]:
            env["value"] = values[env["name"]]
    return runtime, job


async def _finish(api: KubeClient, name: str, timeout: float) -> tuple[dict[str, Any], float]:
    start = time.monotonic()
    while True:
        obj = await api.get(TRAINJOB.api_version, TRAINJOB.plural, name, namespace="default")
        conds = (obj.get("status") or {}).get("conditions") or []
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conds):
            return obj, time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{name} did not finish: {conds}")
        await asyncio.sleep(0.2)


def _condition(obj: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(
        c
        for c in obj["status"]["conditions"]
        if c["type"] in ("Complete", "Failed") and c["status"] == "True"
    )
    return found


def _logs(home: Path, pod_prefix: str) -> dict[str, str]:
    out = {}
    for path in sorted((home / "logs" / "default").glob(f"{pod_prefix}*/*.log")):
        out[path.parent.name] = path.read_text()
    return out


def _alive(home: Path) -> list[str]:
    return [
        f"{s.container} (pid {s.pid})"
        for d in (home / "pods").glob("*")
        for s in read_states(d)
        if ContainerProcess.adopt(s).is_alive()
    ]


async def test_the_example_fetches_then_trains_and_a_second_run_fetches_nothing(
    home: Path, example_data: S3Server
) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        runtime, job = _example(example_data, "first")
        for var in job["spec"]["trainer"]["env"]:
            if var["name"] == "EPOCHS":
                var["value"] = str(EPOCHS)
        await api.create(TRAINING_RUNTIME.api_version, TRAINING_RUNTIME.plural, runtime)
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, job)
        obj, _ = await _finish(api, "first", 180)
        logs = _logs(home, "first-")
        assert _condition(obj)["type"] == "Complete", (obj["status"], logs)
        pods, _ = await api.list(
            POD.api_version, POD.plural, label_selector="jobset.sigs.k8s.io/jobset-name=first"
        )

        def times(step: str, key: str) -> list[str]:
            return [
                cs["state"]["terminated"][key]
                for p in pods
                if p["metadata"]["labels"].get("jobset.sigs.k8s.io/replicatedjob-name") == step
                for cs in p["status"]["containerStatuses"]
            ]

        # dependsOn: every trainer container started after both initializers finished.
        fetched = max(
            times("dataset-initializer", "finishedAt") + times("model-initializer", "finishedAt")
        )
        assert min(times("node", "startedAt")) >= fetched
        init_logs = "".join(v for k, v in logs.items() if "initializer" in k)
        assert "fetching 4 objects" in init_logs and "fetching 2 objects" in init_logs, init_logs
        trainer = next(v for k, v in logs.items() if k.startswith("first-node-0-0"))
        assert "rows 4096 from /workspace/dataset" in trainer, trainer
        losses = [float(x) for x in re.findall(r"epoch +\d+ +loss ([0-9.]+)", trainer)]
        assert len(losses) == EPOCHS and losses[-1] < losses[0] / 2, trainer

        # The same sources again (another TrainJob, whose trainer only lists what it got):
        # everything comes from the cache.
        _, again = _example(example_data, "second")
        again["spec"]["trainer"]["command"] = ["ls", "-R", "/workspace"]
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, again)
        obj, _ = await _finish(api, "second", 180)
        logs = _logs(home, "second-")
        assert _condition(obj)["type"] == "Complete", (obj["status"], logs)
        init_logs = [v for k, v in logs.items() if "initializer" in k]
        assert len(init_logs) == 2
        listing = next(v for k, v in logs.items() if k.startswith("second-node-0-0"))
        assert "part-0003.parquet" in listing and "model.safetensors" in listing, logs
        for text in init_logs:
            assert "cache hit" in text and "nothing to fetch" in text, text
            assert "fetching" not in text, text
    finally:
        await api.close()


def _break(job: dict[str, Any], what: str) -> str:
    """Spoil the dataset initializer's source as ``what`` says; the expected URI."""
    dataset = job["spec"]["initializer"]["dataset"]
    if what == "bucket":
        dataset["storageUri"] = "s3://no-such-bucket/initializers/dataset"
    elif what == "key":
        dataset["storageUri"] = "s3://kubetrain-examples/no/such/key"
    elif what == "scheme":
        dataset["storageUri"] = "gs://kubetrain-examples/initializers/dataset"
    else:
        bad = {
            "endpoint": ("ENDPOINT", "http://127.0.0.1:9"),  # discard: nothing listens there
            "key-id": ("ACCESS_KEY_ID", "AKIAUNKNOWN"),
            "secret": ("SECRET_ACCESS_KEY", "not-the-secret"),
        }[what]
        for env in dataset["env"]:
            if env["name"] == bad[0]:
                env["value"] = bad[1]
    return str(dataset["storageUri"])


CASES = [
    pytest.param("bucket", "bucket 'no-such-bucket' does not exist", id="a missing bucket"),
    pytest.param(
        "key", "no object in bucket 'kubetrain-examples' under prefix", id="a missing key"
    ),
    pytest.param("scheme", "unsupported storage URI scheme (gs://)", id="an unknown scheme"),
    pytest.param("endpoint", "cannot connect to the S3 endpoint", id="an unreachable endpoint"),
    pytest.param("key-id", "the S3 server does not know this access key", id="an unknown key"),
    pytest.param("secret", "the secret access key does not match", id="a wrong secret"),
]


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory, example_data: S3Server) -> Iterator[Path]:
    """One daemon with the example's runtime for the failure cases (each its own TrainJob)."""
    home = tmp_path_factory.mktemp("failures") / "home"

    async def setup() -> None:
        info = await asyncio.to_thread(ensure_daemon, home)
        api = connect(info.kubeconfig)
        try:
            await api.create(
                TRAINING_RUNTIME.api_version,
                TRAINING_RUNTIME.plural,
                _example(example_data, "x")[0],
            )
        finally:
            await api.close()

    try:
        asyncio.run(setup())
        yield home
    finally:
        stop_daemon(home, kill_pods=True, timeout=10)


@pytest.mark.parametrize(("what", "cause"), CASES)
async def test_a_bad_source_fails_the_trainjob_within_30_s_with_the_uri_and_the_cause(
    plane: Path, example_data: S3Server, what: str, cause: str
) -> None:
    info = await asyncio.to_thread(ensure_daemon, plane)
    api = connect(info.kubeconfig)
    name = f"broken-{what}"
    try:
        _, job = _example(example_data, name)
        uri = _break(job, what)
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, job)
        obj, elapsed = await _finish(api, name, 60)
        cond = _condition(obj)
        assert cond["type"] == "Failed", obj["status"]
        assert f"{uri}: {cause}" in cond["message"], cond
        assert elapsed < 30, elapsed
        pods, _ = await api.list(
            POD.api_version, POD.plural, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"
        )
        steps = [p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] for p in pods]
        # One try, no replacement pod, and the trainer never started.
        assert steps.count("dataset-initializer") == 1 and "node" not in steps, steps
        failed = next(p for p in pods if "dataset-initializer" in p["metadata"]["name"])
        assert failed["status"]["containerStatuses"][0]["restartCount"] == 0
        deadline = time.monotonic() + 10
        while _alive(plane) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert _alive(plane) == []
    finally:
        await api.close()
