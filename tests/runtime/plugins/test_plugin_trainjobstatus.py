"""TrainJobStatus plugin (trainer v2.3.0 pkg/runtime/framework/plugins/trainjobstatus/), behind
its feature gate: the KUBEFLOW_TRAINER_SERVER_* env after the framework's, the projected token
and CA volume, and the ``<job>-tls-config`` ConfigMap."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import (
    TEST_ENV,
    Render,
    by_kind,
    container,
    env_of,
    jobset,
    pod,
    torch_runtime,
)

from kubetrain.runtime import Environment, FeatureGates, RenderError, render
from kubetrain.runtime.plugins import framework_for
from kubetrain.testing import make_runtime, make_trainjob

STATUS_ENV = [
    "KUBEFLOW_TRAINER_SERVER_URL",
    "KUBEFLOW_TRAINER_SERVER_CA_CERT",
    "KUBEFLOW_TRAINER_SERVER_TOKEN",
]


@pytest.mark.parametrize(
    ("runtime", "trainer", "names"),
    [
        pytest.param(
            torch_runtime(),
            {},
            [
                "PET_NNODES",
                "PET_NPROC_PER_NODE",
                "PET_NODE_RANK",
                "PET_MASTER_ADDR",
                "PET_MASTER_PORT",
                *STATUS_ENV,
            ],
            id="the status env follows the torch env",
        ),
        pytest.param(
            torch_runtime(), None, STATUS_ENV, id="it applies even without a trainer block"
        ),
        pytest.param(
            make_runtime("plain").job("node", ancestor="trainer").obj(),
            {"env": {"K": "v"}},
            ["K", *STATUS_ENV],
            id="it follows the TrainJob's env on a runtime without an ML policy",
        ),
    ],
)
def test_what_the_gate_contributes(
    checked_render: Render, runtime: Any, trainer: dict[str, Any] | None, names: list[str]
) -> None:
    builder = make_trainjob("p", "ns")
    if trainer is not None:
        builder = builder.trainer(**trainer)
    plan = checked_render(builder.obj(), runtime, gates=FeatureGates())
    assert [n for n, _ in env_of(container(jobset(plan), "node"))] == names
    assert [o["metadata"]["name"] for o in by_kind(plan, "ConfigMap")][-1] == "p-tls-config"


def test_trainjobstatus_gate_on_adds_env_volume_and_ca_configmap(checked_render: Render) -> None:
    plan = checked_render(
        make_trainjob("p", "ns").trainer().obj(), torch_runtime(), gates=FeatureGates()
    )
    assert [o["kind"] for o in plan.objects] == ["ConfigMap", "ConfigMap", "JobSet"]
    tls = plan.objects[1]
    assert tls["metadata"]["name"] == "p-tls-config" and tls["data"] == {"ca.crt": TEST_ENV.ca_pem}
    js = jobset(plan)
    node = container(js, "node")
    env = dict(env_of(node))
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
        "https://kubeflow-trainer-controller-manager.kubeflow-system.svc:10443"
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/p/status"
    )
    assert env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
    assert [n for n, _ in env_of(node)][-3:] == [
        "KUBEFLOW_TRAINER_SERVER_URL",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT",
        "KUBEFLOW_TRAINER_SERVER_TOKEN",
    ]
    assert node["volumeMounts"] == [
        {
            "name": "kubeflow-trainer-token",
            "mountPath": "/var/run/secrets/kubeflow/trainer",
            "readOnly": True,
        }
    ]
    (vol,) = pod(js, "node")["volumes"]
    assert vol["projected"]["sources"] == [
        {
            "serviceAccountToken": {
                "audience": "trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/p/status",
                "expirationSeconds": 3600,
                "path": "token",
            }
        },
        {"configMap": {"name": "p-tls-config", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    ]


def test_trainjobstatus_without_ca_fails_like_upstream() -> None:
    with pytest.raises(RenderError, match=r"failed to find status server ca\.crt in tls secret"):
        render(
            make_trainjob().obj(),
            torch_runtime(),
            gates=FeatureGates(),
            environment=Environment(ca_pem=""),
        )


@pytest.mark.parametrize(
    ("gates", "registered"),
    [
        pytest.param(FeatureGates(), True, id="registered with the gate on (the default)"),
        pytest.param(FeatureGates.upstream_defaults(), False, id="absent with upstream's gates"),
    ],
)
def test_registered_only_with_its_gate(gates: FeatureGates, registered: bool) -> None:
    names = [p.name for p in framework_for(gates, Environment()).plugins]  # type: ignore[attr-defined]
    assert ("trainjobstatus" in names) is registered
