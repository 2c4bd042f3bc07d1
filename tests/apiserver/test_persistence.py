"""Durability: ``kubetrain serve`` killed with SIGKILL loses no answered write, and
resourceVersions keep increasing after the restart."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

SERVE = (
    "import argparse, sys\n"
    "from kubetrain.cli import cmd_serve\n"
    "p = argparse.ArgumentParser(); cmd_serve.add_arguments(p)\n"
    "sys.exit(cmd_serve.run(p.parse_args(sys.argv[1:])))\n"
)


def _start(home: Path, kubeconfig: Path) -> subprocess.Popen[bytes]:
    kubeconfig.unlink(missing_ok=True)
    env = {**os.environ, "KUBETRAIN_HOME": str(home)}
    log = kubeconfig.with_suffix(".log")
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVE, "--kubeconfig", str(kubeconfig)],
            env=env,
            stdout=sink,
            stderr=sink,
        )
    deadline = time.monotonic() + 30
    while not kubeconfig.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"kubetrain serve did not start: {log.read_text()}")
        time.sleep(0.05)
    return proc


# These tests describe the embedded server itself: it kills and restarts kubetrain serve.
pytestmark = pytest.mark.skipif(
    bool(os.environ.get("KUBETRAIN_CONTRACT_KUBECONFIG")), reason="embedded server only"
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_kill_9_loses_nothing_and_resource_versions_keep_increasing(
    home: Path, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = _start(home, kubeconfig)
    try:
        assert yaml.safe_load(kubeconfig.read_text())["current-context"] == "kubetrain-local"
        api = config.new_client_from_config(str(kubeconfig))
        core = client.CoreV1Api(api)
        written = [
            core.create_namespaced_config_map(
                "default", {"metadata": {"name": f"cm-{i}"}, "data": {"i": str(i)}}
            )
            for i in range(40)
        ]
        core.patch_namespaced_config_map("cm-0", "default", {"data": {"i": "patched"}})
        core.delete_namespaced_config_map("cm-1", "default")
        last_rv = max(
            int(cm.metadata.resource_version)
            for cm in core.list_namespaced_config_map("default").items
        )
        api.close()
    finally:
        proc.kill()  # SIGKILL: no shutdown code runs
        proc.wait()
    proc = _start(home, kubeconfig)
    try:
        api = config.new_client_from_config(str(kubeconfig))
        core = client.CoreV1Api(api)
        stored = {cm.metadata.name: cm for cm in core.list_namespaced_config_map("default").items}
        assert set(stored) == {cm.metadata.name for cm in written} - {"cm-1"}
        assert stored["cm-0"].data == {"i": "patched"}
        later = core.create_namespaced_config_map(
            "default", {"metadata": {"name": "after-restart"}}
        )
        assert int(later.metadata.resource_version) > last_rv
        runtimes = client.CustomObjectsApi(api).list_cluster_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes"
        )
        assert "torch-distributed" in {r["metadata"]["name"] for r in runtimes["items"]}, (
            "default runtimes are seeded"
        )
        api.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
