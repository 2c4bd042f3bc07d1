"""The hostPath admission rule of the local engine, as a table: which writes it refuses and where."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubetrain.local.policy import (
    EngineConfig,
    EngineConfigError,
    HostPathPolicy,
    load_engine_config,
)

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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(None, EngineConfig(), id="no engine.yaml: the defaults"),
        pytest.param("maxNumNodes: 5\n", EngineConfig(max_num_nodes=5),
                     id="maxNumNodes sets the limit on a TrainJob's numNodes"),
        pytest.param("allowedHostPaths: [/srv/data/]\nmaxNumNodes: 2000\n",
                     EngineConfig(allowed_host_paths=("/srv/data",), max_num_nodes=2000),
                     id="both settings together"),
        pytest.param("maxNumNodes: 0\n", "maxNumNodes must be an integer >= 1, got 0",
                     id="a limit below one is refused"),
        pytest.param("maxNumNodes: many\n", "maxNumNodes must be an integer >= 1, got 'many'",
                     id="a limit that is no integer is refused"),
        pytest.param("maxNodes: 5\n",
                     "unknown setting 'maxNodes' (known: allowedHostPaths, maxNumNodes)",
                     id="an unknown setting is refused, naming the known ones"),
    ],
)  # fmt: skip
def test_engine_yaml(tmp_path: Path, text: str | None, expected: EngineConfig | str) -> None:
    path = tmp_path / "engine.yaml"
    if text is not None:
        path.write_text(text)
    if isinstance(expected, str):
        with pytest.raises(EngineConfigError) as err:
            load_engine_config(tmp_path)
        assert str(err.value) == f"{path}: {expected}"
    else:
        assert load_engine_config(tmp_path) == replace(expected, source=str(path))
