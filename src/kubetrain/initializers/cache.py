"""``cache://SCHEMA/TABLE``: bootstrap the TrainJob's data cache, as upstream's initializer does.

It reads upstream's env (``TRAIN_JOB_NAME``, ``CACHE_IMAGE``, ``IAM_ROLE``, ``METADATA_LOC``,
``CLUSTER_SIZE``, ``HEAD_CPU``/``HEAD_MEM``, ``WORKER_CPU``/``WORKER_MEM`` and the
``READINESS_*`` timings), creates the same three objects with the TrainJob as their
controlling owner (ServiceAccount ``<job>-cache``, LeaderWorkerSet ``<job>-cache``, Service
``<job>-cache-service``) and waits until the LeaderWorkerSet is ``Available``.

Where kubetrain differs, it is to fail clearly instead of exiting 0 or waiting forever:
the table is read once before anything is created (a missing table or metadata file is the
error, not a cache that never becomes ready); an API error ends the run with exit code 1;
and the wait ends after ``CACHE_READY_TIMEOUT_SECONDS`` (default 600) naming the pods that
are not ready. The standard AWS variables the initializer has (``AWS_*``) are passed on to
the cache's containers, which is how a cache outside EKS (the local engine) reads S3.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.api.access import dicts, obj_at

from .config import Config, InitializerError

__all__ = ["CacheSettings", "cache_objects", "cache_settings", "run_cache"]

log = logging.getLogger("kubetrain.initializers")

NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
CACHE_PORT = 50051
HEALTH_PORT = 8080
LWS_API = "leaderworkerset.x-k8s.io/v1"
_DEFAULTS = {
    "CLUSTER_SIZE": "3",
    "HEAD_CPU": "1",
    "HEAD_MEM": "1Gi",
    "WORKER_CPU": "2",
    "WORKER_MEM": "2Gi",
    "READINESS_INITIAL_DELAY_SECONDS": "5",
    "READINESS_PERIOD_SECONDS": "10",
    "READINESS_TIMEOUT_SECONDS": "5",
    "READINESS_FAILURE_THRESHOLD": "3",
    "CACHE_READY_TIMEOUT_SECONDS": "600",
}
_INTS = (
    "CLUSTER_SIZE",
    "READINESS_INITIAL_DELAY_SECONDS",
    "READINESS_PERIOD_SECONDS",
    "READINESS_TIMEOUT_SECONDS",
    "READINESS_FAILURE_THRESHOLD",
    "CACHE_READY_TIMEOUT_SECONDS",
)


@dataclass(frozen=True)
class CacheSettings:
    uri: str
    schema: str
    table: str
    train_job: str
    image: str
    iam_role: str
    metadata_loc: str
    values: Mapping[str, str]
    aws_env: Mapping[str, str]

    def int(self, name: str) -> int:
        return int(self.values[name])


def cache_settings(cfg: Config, env: Mapping[str, str]) -> CacheSettings:
    """Upstream's env, checked: `InitializerError` names each missing or malformed variable."""
    missing = [n for n in ("TRAIN_JOB_NAME", "CACHE_IMAGE", "METADATA_LOC") if not env.get(n)]
    if missing:
        raise InitializerError(cfg.storage_uri, f"{', '.join(missing)} not set")
    if not cfg.prefix or "/" in cfg.prefix.strip("/"):
        raise InitializerError(cfg.storage_uri, "the cache URI is cache://SCHEMA/TABLE")
    values = {k: env.get(k) or v for k, v in _DEFAULTS.items()}
    for name in _INTS:
        if not values[name].isdigit():
            raise InitializerError(cfg.storage_uri, f"{name}={values[name]!r} is not a number")
    if int(values["CLUSTER_SIZE"]) < 2:
        raise InitializerError(
            cfg.storage_uri,
            f"CLUSTER_SIZE={values['CLUSTER_SIZE']}: a head and at least one worker",
        )
    return CacheSettings(
        uri=cfg.storage_uri,
        schema=cfg.location,
        table=cfg.prefix.strip("/"),
        train_job=env["TRAIN_JOB_NAME"],
        image=env["CACHE_IMAGE"],
        iam_role=env.get("IAM_ROLE", ""),
        metadata_loc=env["METADATA_LOC"],
        values=values,
        aws_env={k: v for k, v in sorted(env.items()) if k.startswith("AWS_") and v},
    )


def _container(s: CacheSettings, role: str) -> dict[str, Any]:
    cpu, mem = (s.values["HEAD_CPU"], s.values["HEAD_MEM"]) if role == "head" else (
        s.values["WORKER_CPU"], s.values["WORKER_MEM"]
    )  # fmt: skip
    env = [
        {"name": "METADATA_LOC", "value": s.metadata_loc},
        {"name": "TABLE_NAME", "value": s.table},
        {"name": "SCHEMA_NAME", "value": s.schema},
        *({"name": k, "value": v} for k, v in s.aws_env.items()),
    ]
    return {
        "name": role,
        "image": s.image,
        "command": [role],
        "args": ["0.0.0.0", str(CACHE_PORT)],
        "resources": {
            "limits": {"cpu": cpu, "memory": mem},
            "requests": {"cpu": cpu, "memory": mem},
        },
        "env": env,
        "ports": [
            {"containerPort": CACHE_PORT, "name": "grpc"},
            {"containerPort": HEALTH_PORT, "name": "health"},
        ],
        "readinessProbe": {
            "httpGet": {"path": "/ready", "port": HEALTH_PORT},
            "initialDelaySeconds": s.int("READINESS_INITIAL_DELAY_SECONDS"),
            "periodSeconds": s.int("READINESS_PERIOD_SECONDS"),
            "timeoutSeconds": s.int("READINESS_TIMEOUT_SECONDS"),
            "failureThreshold": s.int("READINESS_FAILURE_THRESHOLD"),
        },
    }


def cache_objects(
    s: CacheSettings, trainjob: Mapping[str, Any], namespace: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(ServiceAccount, LeaderWorkerSet, Service) for the TrainJob, as upstream makes them."""
    meta = trainjob["metadata"]
    owner = {
        "apiVersion": trainjob["apiVersion"],
        "kind": trainjob["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    name = f"{s.train_job}-cache"
    sa_meta: dict[str, Any] = {"name": name, "namespace": namespace, "ownerReferences": [owner]}
    if s.iam_role:
        sa_meta["annotations"] = {
            "eks.amazonaws.com/sts-regional-endpoints": "true",
            "eks.amazonaws.com/role-arn": s.iam_role,
        }
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": sa_meta}
    lws = {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": s.int("CLUSTER_SIZE"),
                "leaderTemplate": {
                    "metadata": {"labels": {"app": f"{name}-head"}},
                    "spec": {"serviceAccountName": name, "containers": [_container(s, "head")]},
                },
                "workerTemplate": {
                    "spec": {"serviceAccountName": name, "containers": [_container(s, "worker")]}
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{name}-service", "namespace": namespace, "ownerReferences": [owner]},
        "spec": {
            "selector": {"app": f"{name}-head"},
            "ports": [{"protocol": "TCP", "port": CACHE_PORT, "targetPort": CACHE_PORT}],
        },
    }
    return account, lws, service


def _namespace(env: Mapping[str, str]) -> str:
    try:
        return NAMESPACE_FILE.read_text().strip() or "default"
    except OSError:
        return env.get("POD_NAMESPACE") or "default"


def _check_table(s: CacheSettings) -> int:
    """The table's row count; `InitializerError` when the cache could never load it."""
    try:
        from kubetrain.datacache.table import TableError, file_rows, load_table, source_from_env
    except ImportError as err:  # the datacache extra is not installed
        raise InitializerError(s.uri, f"pip install 'kubetrain[datacache]': {err}") from err
    env = {
        **s.aws_env,
        "METADATA_LOC": s.metadata_loc,
        "SCHEMA_NAME": s.schema,
        "TABLE_NAME": s.table,
    }
    try:
        return sum(rows for _, rows in file_rows(load_table(source_from_env(env))))
    except TableError as err:
        raise InitializerError(s.uri, str(err)) from err


def run_cache(cfg: Config, env: Mapping[str, str]) -> None:
    """Create the cache's objects and wait for it; `InitializerError` says why not."""
    s = cache_settings(cfg, env)
    rows = _check_table(s)
    log.info("table %s.%s: %d row(s) at %s", s.schema, s.table, rows, s.metadata_loc)
    asyncio.run(_bootstrap(s, _namespace(env)))


async def _bootstrap(s: CacheSettings, namespace: str) -> None:
    from kubetrain.kube.client import TRANSPORT_ERRORS, ApiError, connect

    try:
        client = connect()
    except Exception as err:
        raise InitializerError(s.uri, f"no Kubernetes API to talk to: {err}") from err
    try:
        try:
            trainjob = await client.get(
                "trainer.kubeflow.org/v1alpha1", "trainjobs", s.train_job, namespace=namespace
            )
        except ApiError as err:
            raise InitializerError(s.uri, f"TrainJob {namespace}/{s.train_job}: {err}") from err
        account, lws, service = cache_objects(s, trainjob, namespace)
        for api_version, plural, obj in (
            ("v1", "serviceaccounts", account),
            (LWS_API, "leaderworkersets", lws),
            ("v1", "services", service),
        ):
            what = f"{obj['kind']} {namespace}/{obj['metadata']['name']}"
            try:
                await client.create(api_version, plural, obj)
                log.info("created %s", what)
            except ApiError as err:
                if err.code == 409:  # a rerun of this initializer: the object is there
                    log.info("%s already exists", what)
                    continue
                if err.code == 404 and plural == "leaderworkersets":
                    raise InitializerError(
                        s.uri, "the cluster serves no LeaderWorkerSet: install LWS first"
                    ) from err
                raise InitializerError(s.uri, f"creating {what}: {err}") from err
        await _wait_available(client, s, namespace, lws["metadata"]["name"])
    except TRANSPORT_ERRORS as err:
        raise InitializerError(s.uri, f"the Kubernetes API: {err}") from err
    finally:
        await client.close()


async def _wait_available(client: Any, s: CacheSettings, namespace: str, name: str) -> None:
    timeout = s.int("CACHE_READY_TIMEOUT_SECONDS")
    deadline = time.monotonic() + timeout
    from kubetrain.kube.client import TRANSPORT_ERRORS

    while True:
        try:
            lws = await client.get(LWS_API, "leaderworkersets", name, namespace=namespace)
        except TRANSPORT_ERRORS as err:
            # A busy API server (the local engine starting the cache's processes on the same
            # cores) answers late: keep asking until the deadline, then fail below.
            if time.monotonic() > deadline:
                raise
            log.warning("reading LeaderWorkerSet %s: %s; retrying", name, err)
            await asyncio.sleep(1.0)
            continue
        conditions = dicts(obj_at(lws, "status").get("conditions"))
        if any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions):
            log.info("LeaderWorkerSet %s is ready: the cache serves %s.%s", name, s.schema, s.table)
            return
        if time.monotonic() > deadline:
            pods, _ = await client.list(
                "v1", "pods", namespace=namespace,
                label_selector=f"leaderworkerset.sigs.k8s.io/name={name}",
            )  # fmt: skip
            waiting = [
                p["metadata"]["name"]
                for p in pods
                if not any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in dicts(obj_at(p, "status").get("conditions"))
                )
            ]
            raise InitializerError(
                s.uri,
                f"the cache (LeaderWorkerSet {namespace}/{name}) was not Available after "
                f"{timeout} s; not ready: {', '.join(waiting) or 'no pods yet'}",
            )
        await asyncio.sleep(1.0)
