"""``daemon stop --kill-pods`` ends every pod's processes, also those of pods the daemon
adopted from a previous one that was stopped with its pods kept."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon_support import sleeping, unique_sleep

from kubetrain.kube.client import connect
from kubetrain.kube.kinds import CONFIGMAP, POD
from kubetrain.local.daemon import ensure_daemon, stop_daemon


def pod(name: str, tag: str, config_map: str | None = None) -> dict[str, Any]:
    # A main process and a child of it: both must go.
    command = ["sh", "-c", f"sleep {tag} & exec sleep {tag}"]
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "busybox", "command": command}],
        },
    }
    if config_map:
        obj["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": config_map}}]
        obj["spec"]["containers"][0]["volumeMounts"] = [{"name": "cfg", "mountPath": "/cfg"}]
    return obj


async def until(check: Callable[[], bool], what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        await asyncio.sleep(0.1)


async def test_kill_pods_after_a_restart_ends_the_adopted_pods_and_their_children(
    home: Path,
) -> None:
    tags = [unique_sleep() for _ in range(4)]
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    config_map = {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default"}
    }  # fmt: skip
    try:
        await api.create(CONFIGMAP.api_version, CONFIGMAP.plural, config_map)
        for i, tag in enumerate(tags[:2]):
            await api.create(POD.api_version, POD.plural, pod(f"p{i}", tag))
        # These pods' ConfigMap goes while they run: the next daemon, adopting them, waits for
        # it to come back with their sandboxes not yet built, however idle the machine.
        for i, tag in enumerate(tags[2:]):
            await api.create(POD.api_version, POD.plural, pod(f"waits{i}", tag, "cfg"))
        await until(lambda: all(len(sleeping(t)) == 2 for t in tags), "every pod sleeping")
        await api.delete(CONFIGMAP.api_version, CONFIGMAP.plural, "cfg", namespace="default")
    finally:
        await api.close()
    assert await asyncio.to_thread(stop_daemon, home)
    assert all(len(sleeping(t)) == 2 for t in tags), "stopped without --kill-pods: pods live on"
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        # A pod deleted while the daemon adopts it: its processes end before the Pod goes.
        await api.delete(POD.api_version, POD.plural, "waits0", namespace="default")
        await until(lambda: not sleeping(tags[2]), "the deleted pod's processes ended", 60)
    finally:
        await api.close()
    # Stopped with --kill-pods, the daemon ends every other pod's processes.
    assert await asyncio.to_thread(stop_daemon, home, kill_pods=True)
    assert {t: sleeping(t) for t in tags} == {t: [] for t in tags}
