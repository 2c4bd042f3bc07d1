"""The data-cache example on the local engine, end to end: the dataset initializer
(``cache://``) creates the cache's ServiceAccount, LeaderWorkerSet and Service; the LWS pods
come up and become Ready by their readiness probes; the 2 torch nodes stream disjoint row
ranges from the cache, and the union is the whole table."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.kube.client import KubeClient, connect
from kubetrain.kube.kinds import (
    EVENT,
    LEADER_WORKER_SET,
    POD,
    ROLE,
    ROLE_BINDING,
    SERVICE_ACCOUNT,
    TRAINING_RUNTIME,
    TRAINJOB,
)
from kubetrain.local.daemon import ensure_daemon, stop_daemon
from kubetrain.local.sandbox import sandbox_mode

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sandbox_mode().mode != "bwrap", reason="needs bubblewrap"),
]
pytest.importorskip("torch")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "data-cache"
RESOURCES = {
    "TrainingRuntime": TRAINING_RUNTIME,
    "ServiceAccount": SERVICE_ACCOUNT,
    "Role": ROLE,
    "RoleBinding": ROLE_BINDING,
}


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "home"
    try:
        yield path
    finally:
        stop_daemon(path, kill_pods=True, timeout=10)


def _example(table: Any, name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The example's runtime and TrainJob, pointed at the test's table and S3 server."""
    objects = list(yaml.safe_load_all((EXAMPLE / "runtime.yaml").read_text()))
    for obj in objects:
        obj["metadata"]["namespace"] = "default"
    job = yaml.safe_load((EXAMPLE / "trainjob.yaml").read_text())
    job["metadata"].update(name=name, namespace="default")
    values = {
        "METADATA_LOC": table.metadata_loc,
        "AWS_ENDPOINT_URL": table.s3.pod_endpoint,
        "AWS_ACCESS_KEY_ID": table.s3.access_key_id,
        "AWS_SECRET_ACCESS_KEY": table.s3.secret_access_key,
    }
    for env in job["spec"]["initializer"]["dataset"]["env"]:
        env["value"] = values.get(env["name"], env["value"])
    command = job["spec"]["trainer"]["command"]
    command[2] = command[2].replace(
        "/tmp/train.py\n", f"/tmp/train.py --rows {table.rows.num_rows}\n"
    )
    return objects, job


async def _finish(api: KubeClient, name: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        obj = await api.get(TRAINJOB.api_version, TRAINJOB.plural, name, namespace="default")
        conds = (obj.get("status") or {}).get("conditions") or []
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conds):
            return obj
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} did not finish: {conds}")
        await asyncio.sleep(0.2)


def _logs(home: Path, pod_prefix: str) -> dict[str, str]:
    return {
        path.parent.name: path.read_text()
        for path in sorted((home / "logs" / "default").glob(f"{pod_prefix}*/*.log"))
    }


async def test_the_example_streams_disjoint_halves_that_make_the_whole_table(
    home: Path, iceberg_table: Any
) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        objects, job = _example(iceberg_table, "dc")
        for obj in objects:
            await api.create(RESOURCES[obj["kind"]].api_version, RESOURCES[obj["kind"]].plural, obj)
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, job)
        obj = await _finish(api, "dc", 240)
        logs = _logs(home, "dc-")
        conds = {c["type"]: c for c in obj["status"]["conditions"]}
        assert conds.get("Complete", {}).get("status") == "True", (obj["status"], logs)
        lws = await api.get(
            LEADER_WORKER_SET.api_version, LEADER_WORKER_SET.plural, "dc-cache", namespace="default"
        )
        assert any(
            c["type"] == "Available" and c["status"] == "True" for c in lws["status"]["conditions"]
        )
        rows = iceberg_table.rows.num_rows
        whole = sum(iceberg_table.rows.column("id").to_pylist())
        ranks = [next(v for k, v in logs.items() if k.startswith(f"dc-node-0-{r}")) for r in (0, 1)]
        per_epoch = []
        for epoch in range(2):
            got = [
                re.search(rf"epoch {epoch} rank {r} rows (\d+) checksum (\d+)", text)
                for r, text in enumerate(ranks)
            ]
            assert all(got), ranks
            counts = [int(m.group(1)) for m in got if m]
            sums = [int(m.group(2)) for m in got if m]
            # Disjoint halves: the counts split the table, the checksums add up to the table's.
            assert counts == [rows // 2, rows - rows // 2], ranks
            assert sum(sums) == whole, ranks
            per_epoch.append(sums)
            assert (
                f"epoch {epoch} all 2 ranks: rows {rows} checksum {whole}: the whole table"
                in ranks[0]
            ), ranks[0]
        # Every epoch each rank gets the same rows again.
        assert per_epoch[0] == per_epoch[1]
    finally:
        await api.close()


# The rank reads epoch 0 whole (the undisturbed figures), then stops after the first batch of
# epoch 1 with one RecordBatch read ahead (prefetch=1) and its reader thread holding the next:
# three of the four data files worker 0 streams, none of worker 1's rows. It says so, and the test
# kills worker 0's pod; the LeaderWorkerSet takes the whole group down. The rank waits until
# worker 1's pod no longer serves its rows, then finishes the epoch: its reader must retry on
# the new group and resume after the rows it already gave. The test holds S3 stalled from the
# kill until the reader has failed once, so the new group cannot have loaded the table and
# be serving already when the reader reaches worker 1 (worker 0's last batch is small and
# already buffered: that stream ends cleanly).
MID_EPOCH_READER = """
import time
import pyarrow.flight as flight
from kubetrain.datacache.dataset import CacheDataset
from kubetrain.datacache.reader import default_endpoint

def add(total, batch):
    ids = batch.column("id").to_pylist()
    return total[0] + len(ids), total[1] + sum(ids)

dataset = CacheDataset(batch_size=100, prefetch=1)
total = (0, 0)
for batch in dataset:
    total = add(total, batch)
print("epoch 0 rows %d checksum %d" % total, flush=True)

def serves(endpoint):
    client = flight.connect(endpoint.locations[0])
    try:
        client.do_get(endpoint.ticket).read_all()
        return True
    except (flight.FlightError, OSError):
        return False
    finally:
        client.close()

head = flight.connect(default_endpoint())
info = head.get_flight_info(flight.FlightDescriptor.for_path("0", "1"))
head.close()
assert len(info.endpoints) == 2, info
stream = iter(dataset)
total = add((0, 0), next(stream))
print("epoch 1 paused after %d rows" % total[0], flush=True)
deadline = time.monotonic() + 120
while serves(info.endpoints[-1]):
    if time.monotonic() > deadline:
        raise SystemExit("the cache group was not taken down")
    time.sleep(0.1)
print("epoch 1 resumes: worker 1 is gone", flush=True)
for batch in stream:
    total = add(total, batch)
print("epoch 1 rows %d checksum %d" % total, flush=True)
"""


@pytest.fixture
def eight_file_table(iceberg_table: Any) -> Any:
    """The test table again in 8 data files: each worker streams 4 RecordBatches."""
    from kubetrain.testing.iceberg import s3_properties, write_table

    s3 = iceberg_table.s3
    props = s3_properties(s3.endpoint, s3.access_key_id, s3.secret_access_key)
    loc = write_table(
        iceberg_table.rows, bucket="datacache", namespace="reviews", name="eight",
        properties=props, files=8,
    )  # fmt: skip
    return dataclasses.replace(iceberg_table, metadata_loc=loc)


async def test_a_cache_worker_killed_mid_epoch_takes_its_group_down_and_the_rank_resumes_with_the_same_rows(
    home: Path, eight_file_table: Any
) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        objects, job = _example(eight_file_table, "kill")
        job["spec"]["trainer"].update(numNodes=1, command=["python", "-c", MID_EPOCH_READER])
        for obj in objects:
            await api.create(RESOURCES[obj["kind"]].api_version, RESOURCES[obj["kind"]].plural, obj)
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, job)
        deadline = time.monotonic() + 240
        while not any("epoch 1 paused" in v for k, v in _logs(home, "kill-node-").items()):
            assert time.monotonic() < deadline, _logs(home, "kill-")
            await asyncio.sleep(0.2)
        with eight_file_table.s3.paused():
            await api.delete(POD.api_version, POD.plural, "kill-cache-0-1", namespace="default")
            while True:
                trainer = "".join(_logs(home, "kill-node-0-0").values())
                after = trainer.partition("epoch 1 resumes")[2]
                if "retrying" in after or "epoch 1 rows" in after:
                    break
                assert time.monotonic() < deadline, _logs(home, "kill-")
                await asyncio.sleep(0.2)
        obj = await _finish(api, "kill", 240)
        logs = _logs(home, "kill-")
        conds = {c["type"]: c for c in obj["status"]["conditions"]}
        assert conds.get("Complete", {}).get("status") == "True", (obj["status"], logs)
        trainer = next(v for k, v in logs.items() if k.startswith("kill-node-0-0"))
        ids = eight_file_table.rows.column("id").to_pylist()
        whole = f"rows {len(ids)} checksum {sum(ids)}"
        assert f"epoch 0 {whole}" in trainer, trainer
        # Paused inside the epoch: fewer rows read than the table holds.
        paused = re.search(r"epoch 1 paused after (\d+) rows", trainer)
        assert paused and 0 < int(paused.group(1)) < len(ids), trainer
        # The rows after the kill came through a retry, and the epoch equals the undisturbed one.
        after = trainer[trainer.index("epoch 1 resumes") :]
        assert "retrying" in after, trainer
        assert f"epoch 1 {whole}" in after, trainer
        events, _ = await api.list(EVENT.api_version, EVENT.plural)
        assert any(
            e.get("reason") == "RecreateGroup" and "kill-cache-0-1" in e.get("message", "")
            for e in events
        ), "the group was recreated because of the killed worker"
    finally:
        await api.close()
