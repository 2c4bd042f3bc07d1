"""``kubetrain apply --convert`` sends a converted v1 job to a cluster (here the embedded API
server, with its schema checks and admission): the generated runtime first, then the TrainJob."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from migrate_helpers import UPSTREAM_V1

from kubetrain.api.schema import crd_manifests
from kubetrain.cli.main import main
from kubetrain.local.apiserver import ApiServer, ServerThread
from kubetrain.runtime.defaults import default_runtimes

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("home")
    thread = ServerThread(
        lambda: ApiServer(home, in_memory=True, crds=crd_manifests(), seed_objects=default_runtimes)
    )
    thread.start()
    path = thread.write_kubeconfig(home / "kubeconfig")
    from lightkube import Client, KubeConfig
    from lightkube.resources.core_v1 import Namespace

    # Upstream's examples name the kubeflow namespace.
    with Client(KubeConfig.from_file(path), field_manager="test") as client:
        client.create(Namespace.from_dict({"metadata": {"name": "kubeflow"}}))
    try:
        yield str(path)
    finally:
        thread.stop()


@pytest.mark.parametrize(
    ("file", "applied"),
    [
        ("tfjob-dist-mnist.yaml", ["trainingruntime.trainer.kubeflow.org/dist-mnist-for-e2e-test-runtime",
                                   "trainjob.trainer.kubeflow.org/dist-mnist-for-e2e-test"]),
        ("pytorch-simple.yaml", ["trainjob.trainer.kubeflow.org/pytorch-simple"]),
        ("mpijob-pi.yaml", ["trainingruntime.trainer.kubeflow.org/pi-runtime", "trainjob.trainer.kubeflow.org/pi"]),
    ],
    ids=["a TFJob with its generated runtime", "a PyTorchJob on torch-distributed", "an MPIJob"],
)  # fmt: skip
def test_apply_convert_is_admitted_by_the_api_server(
    kubeconfig: str, file: str, applied: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["apply", "--convert", "-f", str(UPSTREAM_V1 / file), "--kubeconfig", kubeconfig]
    assert main([*args, "-n", "default", "-o", "name"]) == 0
    out, err = capsys.readouterr()
    assert out.split() == applied
    assert " -> TrainJob " in err  # the report


def test_unconverted_v1_yaml_is_not_sent(
    kubeconfig: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["apply", "-f", str(UPSTREAM_V1 / "jaxjob-simple.yaml"), "--kubeconfig", kubeconfig])
        == 1
    )
    assert "only with --convert" in capsys.readouterr().err
