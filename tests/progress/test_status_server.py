"""The status server against the real embedded API server: what it writes, and what it refuses.

Every refused request must leave the TrainJob exactly as it was (same resourceVersion, same
status) and add nothing to the metrics history.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from progress_plane import NAMESPACE, Plane

from kubetrain.controller.statusserver import MAX_BODY_BYTES, status_audience
from kubetrain.local.tokens import BoundPod, load_or_create_key, mint

REPO = Path(__file__).resolve().parents[2]
JOB = "job"
POD = "job-node-0-0"


def good_status(**extra: Any) -> dict[str, Any]:
    return {
        "trainerStatus": {
            "progressPercentage": 40,
            "estimatedRemainingSeconds": 12,
            "metrics": [{"name": "loss", "value": "0.5"}],
            "lastUpdatedTime": "2026-11-29T08:00:00Z",
            **extra,
        }
    }


async def post(
    plane: Plane,
    job: str,
    *,
    token: str | None,
    body: bytes | None = None,
    json_body: Any = None,
    content_type: str = "application/json",
    method: str = "POST",
    path: str | None = None,
) -> tuple[int, Any]:
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = body if body is not None else json.dumps(json_body).encode()
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method, path or plane.status_url(job), data=data, headers=headers, ssl=context
        ) as resp,
    ):
        text = await resp.text()
        try:
            return resp.status, json.loads(text)
        except ValueError:
            return resp.status, text


@pytest.fixture
async def ready(plane: Plane) -> tuple[Plane, str]:
    """A TrainJob with one pod, and the pod's token from TokenRequest."""
    await plane.create_job(JOB)
    await plane.create_job("other")
    pod = await plane.create_pod(POD)
    return plane, await plane.token_for(JOB, pod=pod)


async def test_a_report_lands_in_the_status_and_the_history(ready: tuple[Plane, str]) -> None:
    plane, token = ready
    code, body = await post(plane, JOB, token=token, json_body=good_status())
    assert code == 200
    assert body == good_status()
    status = (await plane.trainjob(JOB))["status"]["trainerStatus"]
    assert status == good_status()["trainerStatus"]
    job = await plane.trainjob(JOB)
    managers = {m["manager"] for m in job["metadata"].get("managedFields", [])}
    assert "trainer-status" in managers
    (point,) = plane.history.series(NAMESPACE, JOB)
    assert (point.progress, point.eta, point.metrics) == (40, 12, {"loss": "0.5"})


async def test_unknown_fields_are_dropped_not_refused(ready: tuple[Plane, str]) -> None:
    plane, token = ready
    code, body = await post(plane, JOB, token=token, json_body=good_status(stage="warmup"))
    assert code == 200
    assert "stage" not in (await plane.trainjob(JOB))["status"]["trainerStatus"]
    assert "stage" not in body["trainerStatus"]


async def test_a_body_without_trainer_status_is_echoed_and_writes_nothing(
    ready: tuple[Plane, str],
) -> None:
    plane, token = ready
    before = await plane.trainjob(JOB)
    assert await post(plane, JOB, token=token, json_body={}) == (200, {})
    assert (await plane.trainjob(JOB))["metadata"]["resourceVersion"] == before["metadata"][
        "resourceVersion"
    ]


def _foreign_key_token(plane: Plane) -> str:
    return mint(
        b"x" * 32,
        namespace=NAMESPACE,
        service_account="default",
        audiences=[status_audience(NAMESPACE, JOB)],
        now=int(time.time()),
    )


def _expired_token(plane: Plane) -> str:
    # Signed with the API server's own key, bound to the live pod: only the time is wrong.
    pod = plane.server.engine.reader.get("v1", "Pod", NAMESPACE, POD)
    assert pod is not None
    return mint(
        load_or_create_key(plane.home),
        namespace=NAMESPACE,
        service_account="default",
        audiences=[status_audience(NAMESPACE, JOB)],
        now=int(time.time()) - 7200,
        expiration_s=3600,
        pod=BoundPod(POD, pod["metadata"]["uid"]),
    )


def _other_namespace_token(plane: Plane) -> str:
    # Right audience, but the service account lives in another namespace.
    return mint(
        load_or_create_key(plane.home),
        namespace="kube-system",
        service_account="default",
        audiences=[status_audience(NAMESPACE, JOB)],
        now=int(time.time()),
    )


Case = Callable[[Plane, str], Awaitable[tuple[int, Any]]]


async def _other_jobs_token(plane: Plane, token: str) -> tuple[int, Any]:
    other = await plane.token_for("other")
    return await post(plane, JOB, token=other, json_body=good_status())


async def _api_server_token(plane: Plane, token: str) -> tuple[int, Any]:
    # The API server's own admin credential is not a status token.
    return await post(plane, JOB, token=plane.server.token, json_body=good_status())


async def _deleted_pod(plane: Plane, token: str) -> tuple[int, Any]:
    await plane.kube.delete("v1", "pods", POD, namespace=NAMESPACE)
    # At once (issue 13, finding 2): no accepted answer is cached, so none outlives the pod.
    return await post(plane, JOB, token=token, json_body=good_status())


async def _chunked_oversized(plane: Plane, token: str) -> tuple[int, Any]:
    async def chunks() -> Any:
        for _ in range(20):
            yield b" " * 8192
        yield json.dumps(good_status()).encode()

    context = ssl.create_default_context(cafile=str(plane.ca_file))
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(plane.status_url(JOB), data=chunks(), headers=headers, ssl=context) as resp,
    ):
        return resp.status, await resp.text()


def _simple(**kw: Any) -> Case:
    async def case(plane: Plane, token: str) -> tuple[int, Any]:
        args = {"token": token, "json_body": good_status(), **kw}
        for key, value in list(args.items()):
            if callable(value):
                args[key] = value(plane)
        return await post(plane, JOB, **args)

    return case


REFUSALS: list[Any] = [
    pytest.param(_simple(token=None), 403, id="missing token"),
    pytest.param(_simple(token="garbage"), 403, id="wrong token"),
    pytest.param(_simple(token=_foreign_key_token), 403, id="token signed by someone else"),
    pytest.param(_other_jobs_token, 403, id="another job's token"),
    pytest.param(_simple(token=_expired_token), 403, id="expired token"),
    pytest.param(_simple(token=_other_namespace_token), 403, id="token of another namespace"),
    pytest.param(_api_server_token, 403, id="the API server's admin token"),
    pytest.param(_deleted_pod, 403, id="finding 2: token of a deleted pod, at once"),
    pytest.param(_simple(body=b"{" + b" " * MAX_BODY_BYTES + b"}"), 413, id="oversized body"),
    pytest.param(_chunked_oversized, 413, id="oversized chunked body"),
    pytest.param(_simple(body=b'{"trainerStatus": {'), 422, id="malformed JSON"),
    pytest.param(_simple(body=b"\xff\xfe"), 422, id="not UTF-8"),
    pytest.param(_simple(json_body=[1, 2]), 422, id="JSON but not an object"),
    pytest.param(_simple(content_type="text/plain"), 415, id="wrong content type"),
    pytest.param(
        _simple(
            json_body=good_status(metrics=[{"name": f"m{i}", "value": "1"} for i in range(257)])
        ),
        422,
        id="257 metrics",
    ),
    pytest.param(
        _simple(json_body=good_status(metrics=[{"name": "n" * 65, "value": "1"}])),
        422,
        id="metric name of 65 characters",
    ),
    pytest.param(
        _simple(json_body=good_status(metrics=[{"name": "loss", "value": "v" * 65}])),
        422,
        id="metric value of 65 characters",
    ),
    pytest.param(
        _simple(json_body=good_status(metrics=[{"name": "loss", "value": ""}])),
        422,
        id="empty metric value",
    ),
    pytest.param(
        _simple(json_body=good_status(metrics=[{"name": "loss"}])), 422, id="metric without value"
    ),
    pytest.param(
        _simple(json_body=good_status(progressPercentage=101)), 422, id="progress over 100"
    ),
    pytest.param(
        _simple(json_body=good_status(progressPercentage=50.5)), 422, id="progress not an integer"
    ),
    pytest.param(
        _simple(json_body=good_status(estimatedRemainingSeconds=-1)), 422, id="negative ETA"
    ),
    pytest.param(
        _simple(json_body=good_status(estimatedRemainingSeconds=1e26)),
        422,
        id="finding 8: an ETA of 1e26 seconds (int32 bound)",
    ),
    pytest.param(
        _simple(json_body=good_status(estimatedRemainingSeconds=2**31)),
        422,
        id="finding 8: an ETA just beyond int32",
    ),
    pytest.param(
        _simple(json_body={"trainerStatus": {"progressPercentage": 5}}),
        422,
        id="no lastUpdatedTime",
    ),
    pytest.param(
        _simple(json_body=good_status(lastUpdatedTime="yesterday")),
        422,
        id="lastUpdatedTime not a date-time",
    ),
    pytest.param(_simple(method="PUT"), 404, id="PUT instead of POST"),
    pytest.param(_simple(path="https://127.0.0.1:1/x"), None, id="placeholder: replaced below"),
]
# The last entry needs the plane's URL; rebuild it as a path outside the route.
REFUSALS[-1] = pytest.param(
    _simple(
        path=lambda p: (
            p.url + "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/job"
        )
    ),
    404,
    id="path outside the route",
)


@pytest.mark.parametrize(("case", "code"), REFUSALS)
async def test_refused_requests_change_nothing(
    ready: tuple[Plane, str], case: Case, code: int
) -> None:
    plane, token = ready
    assert (await post(plane, JOB, token=token, json_body=good_status()))[0] == 200
    plane.status._last_write.clear()  # the refusal under test must not be a throttle 429
    before = await plane.trainjob(JOB)
    got, body = await case(plane, token)
    assert got == code, body
    if isinstance(body, dict):
        assert body["kind"] == "Status" and body["code"] == code
    after = await plane.trainjob(JOB)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["status"] == before["status"]
    assert len(plane.history.series(NAMESPACE, JOB)) == 1


async def test_a_job_that_does_not_exist_is_404_and_nothing_is_created(plane: Plane) -> None:
    token = await plane.token_for("ghost")
    code, body = await post(plane, "ghost", token=token, json_body=good_status())
    assert (code, body["reason"]) == (404, "NotFound")
    assert plane.history.series(NAMESPACE, "ghost") == []


async def test_reports_closer_than_the_minimum_interval_get_429(ready: tuple[Plane, str]) -> None:
    plane, token = ready
    assert (await post(plane, JOB, token=token, json_body=good_status()))[0] == 200
    assert (await post(plane, JOB, token=token, json_body=good_status()))[0] == 429


async def test_a_flood_of_reports_leaves_the_server_responsive(ready: tuple[Plane, str]) -> None:
    """2,000 requests from 50 connections at once, mostly bad; the good path stays fast."""
    plane, token = ready
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    tokens = [token, "garbage", _foreign_key_token(plane), await plane.token_for("other")]
    counts: dict[int, int] = {}
    reviews_before = plane.authority.reviewed
    started = time.monotonic()
    connector = aiohttp.TCPConnector(limit=50, ssl=context)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> None:
            headers = {
                "Content-Type": "application/json",
                "Authorization": f"Bearer {tokens[i % 4]}",
            }
            async with session.post(
                plane.status_url(JOB), data=json.dumps(good_status()), headers=headers
            ) as r:
                await r.read()
                counts[r.status] = counts.get(r.status, 0) + 1

        await asyncio.gather(*(one(i) for i in range(2000)))
    elapsed = time.monotonic() - started
    assert elapsed < 60, f"2,000 reports took {elapsed:.1f}s"
    assert set(counts) <= {200, 403, 429}, counts
    assert counts.get(403, 0) == 1500
    plane.status._last_write.clear()
    t0 = time.monotonic()
    assert (await post(plane, JOB, token=token, json_body=good_status()))[0] == 200
    assert time.monotonic() - t0 < 2.0
    # Refusals are cached: the 1,500 bad reports cost a handful of TokenReviews. Acceptances
    # are not (a token is good only while its pod lives, issue 13 finding 2): at most one
    # review per good report, fewer where concurrent ones share a review.
    assert plane.authority.reviewed - reviews_before < 500 + 20
    assert len(plane.history.series(NAMESPACE, JOB)) == counts.get(200, 0) + 1


def _env_for(plane: Plane, token_file: Path, job: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBEFLOW_TRAINER_")}
    env.update(
        KUBEFLOW_TRAINER_SERVER_URL=plane.status_url(job),
        KUBEFLOW_TRAINER_SERVER_CA_CERT=str(plane.ca_file),
        KUBEFLOW_TRAINER_SERVER_TOKEN=str(token_file),
        KUBETRAIN_PROGRESS_INTERVAL="0.3",
        PYTHONPATH=str(REPO / "src"),
    )
    env.pop("RANK", None)
    return env


async def _run(code: str, env: dict[str, str], timeout: float = 60) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    return int(proc.returncode or 0), out.decode()


TRAINING = """
import math, time
from kubetrain import progress
total = 40
for step in range(1, total + 1):
    time.sleep(0.02)
    progress.report(step=step, total_steps=total, metrics={"loss": math.exp(-step / 10), "lr": 0.001})
print("trained")
"""


async def test_a_real_training_process_reports_through_to_the_status(
    ready: tuple[Plane, str], tmp_path: Path
) -> None:
    plane, token = ready
    token_file = tmp_path / "token"
    token_file.write_text(token)
    code, out = await _run(TRAINING, _env_for(plane, token_file, JOB))
    assert code == 0 and "trained" in out, out
    status = (await plane.trainjob(JOB))["status"]["trainerStatus"]
    assert status["progressPercentage"] == 100
    assert status["estimatedRemainingSeconds"] == 0
    assert {m["name"]: m["value"] for m in status["metrics"]} == {
        "loss": "0.0183156",
        "lr": "0.001",
    }
    assert status["lastUpdatedTime"].endswith("Z")
    series = plane.history.series(NAMESPACE, JOB)
    assert len(series) >= 2, series
    progress = [p.progress for p in series]
    assert progress == sorted(progress) and progress[-1] == 100


async def test_outside_a_trainjob_the_reporter_is_silent(plane: Plane) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBEFLOW_TRAINER_")}
    env["PYTHONPATH"] = str(REPO / "src")
    code, out = await _run(TRAINING, env)
    assert (code, out.strip()) == (0, "trained")


SDK = """
from kubeflow.trainer import update_trainjob_status
print(update_trainjob_status(progress_percent=150, estimated_remaining_seconds=-5,
                             metrics={"loss": 0.25, "step": 10, "note": "warm"}))
"""


async def test_the_official_sdk_helper_updates_the_status_unchanged(
    ready: tuple[Plane, str], tmp_path: Path
) -> None:
    pytest.importorskip("kubeflow.trainer", reason="the official kubeflow SDK is a test dependency")
    plane, token = ready
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    code, out = await _run(SDK, _env_for(plane, token_file, JOB))
    assert code == 0 and out.strip().endswith("True"), out
    status = (await plane.trainjob(JOB))["status"]["trainerStatus"]
    assert status["progressPercentage"] == 100  # the helper clamps 150
    assert status["estimatedRemainingSeconds"] == 0  # and -5
    assert status["metrics"] == [
        {"name": "loss", "value": "0.25"},
        {"name": "step", "value": "10"},
        {"name": "note", "value": "warm"},
    ]
    assert status["lastUpdatedTime"].endswith("+00:00")  # isoformat(), passed through as sent
    assert len(plane.history.series(NAMESPACE, JOB)) == 1


async def test_the_official_sdk_helper_with_another_jobs_token_is_refused(
    ready: tuple[Plane, str], tmp_path: Path
) -> None:
    pytest.importorskip("kubeflow.trainer", reason="the official kubeflow SDK is a test dependency")
    plane, _ = ready
    token_file = tmp_path / "token"
    token_file.write_text(await plane.token_for("other"))
    code, out = await _run(SDK, _env_for(plane, token_file, JOB))
    assert code == 0 and out.strip().endswith("False"), out
    assert (
        "status" not in await plane.trainjob(JOB)
        or "trainerStatus" not in (await plane.trainjob(JOB))["status"]
    )
