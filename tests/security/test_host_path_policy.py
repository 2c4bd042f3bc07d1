"""The hostPath admission rule of the local engine, as a table: which writes it refuses and where."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.local.policy import EngineConfig, HostPathPolicy

ALLOWED = EngineConfig(allowed_host_paths=("/srv/data",))


def _pod_template(path: str) -> dict[str, Any]:
    return {"spec": {"volumes": [{"name": "v", "hostPath": {"path": path}}]}}


def _jobset(path: str) -> dict[str, Any]:
    return {
        "kind": "JobSet",
        "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": _pod_template(path)}}}]},
    }  # fmt: skip


class _NoReader:
    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        return None

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[Any]:
        return []


CASES = [
    pytest.param("CREATE", _jobset("/etc"), None,
                 ["spec.replicatedJobs[0].template.spec.template.spec.volumes[0].hostPath.path"],
                 id="a new JobSet mounting /etc is refused at the volume's path"),
    pytest.param("CREATE", _jobset("/srv/data/set"), None, [],
                 id="a path under an allowed directory is admitted"),
    pytest.param("CREATE", {"kind": "Pod", **_pod_template("relative")}, None,
                 ["spec.volumes[0].hostPath.path"], id="a relative path is refused"),
    pytest.param("UPDATE", _jobset("/etc"), _jobset("/srv/data"),
                 ["spec.replicatedJobs[0].template.spec.template.spec.volumes[0].hostPath.path"],
                 id="an update that changes the spec to /etc is refused"),
    pytest.param("UPDATE", {**_jobset("/etc"), "status": {"x": 1}}, _jobset("/etc"), [],
                 id="a write that leaves the spec as stored is not judged again"),
    pytest.param("DELETE", _jobset("/etc"), _jobset("/etc"), [], id="deletes are never refused"),
    pytest.param("CREATE", {"kind": "ConfigMap", "data": {"volumes": "x"}}, None, [],
                 id="objects without a spec pass untouched"),
]  # fmt: skip


@pytest.mark.parametrize(("operation", "obj", "old", "refused_at"), CASES)
def test_host_path_policy(
    operation: Any, obj: dict[str, Any], old: dict[str, Any] | None, refused_at: list[str]
) -> None:
    errors, warnings = HostPathPolicy(ALLOWED).validate(operation, obj, old, reader=_NoReader())
    assert [e.path for e in errors] == refused_at
    assert warnings == []
