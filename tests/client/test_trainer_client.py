"""kubetrain.TrainerClient on the local engine: the official SDK's scenario, run for real."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubetrain.client import types as T
from kubetrain.client.errors import NotFoundError
from kubetrain.client.trainer_client import TrainerClient

pytestmark = pytest.mark.timeout(150)


def greet(greeting: str, punctuation: str = ".") -> None:
    import os

    print(
        f"{greeting} from node {os.environ.get('PET_NODE_RANK')} rank {os.environ.get('RANK')}{punctuation}"
    )


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainerClient]:
    from kubetrain.local.daemon import stop_daemon

    home = tmp_path_factory.mktemp("sdkhome")
    sdk = TrainerClient(T.LocalBackendConfig(home=str(home)))
    try:
        yield sdk
    finally:
        sdk.close()
        stop_daemon(home, kill_pods=True)


def test_runtimes_are_listed_and_found_by_name(client: TrainerClient) -> None:
    names = [r.name for r in client.list_runtimes()]
    assert "torch-distributed" in names
    runtime = client.get_runtime("torch-distributed")
    assert (runtime.kind, runtime.trainer.framework, runtime.trainer.trainer_type) == (
        T.RuntimeKind.CLUSTER_TRAINING_RUNTIME,
        "torch",
        T.TrainerType.CUSTOM_TRAINER,
    )
    with pytest.raises(NotFoundError, match='runtime "nope" not found'):
        client.get_runtime("nope")


@pytest.mark.slow
@pytest.mark.timeout(300)  # torch's port 29500 is queued machine-wide behind other jobs
def test_a_function_trains_on_two_nodes_with_keyword_arguments(client: TrainerClient) -> None:
    name = client.train(
        trainer=T.CustomTrainer(
            func=greet,
            func_args={"greeting": "hello", "punctuation": "!"},
            num_nodes=2,
            packages_to_install=["PyYAML"],  # installed already: no pip run
        )
    )
    job = client.wait_for_job_status(name, timeout=280, polling_interval=0.5)
    assert (job.status, job.num_nodes) == ("Complete", 2)
    assert [s.name for s in job.steps] == ["node-0", "node-1"]
    logs = list(client.get_job_logs(name))
    assert "Python packages already satisfied: PyYAML" in logs
    assert "hello from node 0 rank 0!" in logs
    assert [j.name for j in client.list_jobs() if j.name == name] == [name]
    assert any(e.reason for e in client.get_job_events(name))
    client.delete_job(name)
    with pytest.raises(NotFoundError):
        client.get_job(name)


@pytest.mark.slow  # the Job's pods are retried (with backoff) before the JobSet fails
@pytest.mark.timeout(300)  # and torch's port 29500 may be queued behind other jobs
def test_waiting_on_a_failed_job_raises_at_once(client: TrainerClient) -> None:
    # A plain failing command: no torchrun start-up per retry.
    name = client.train(
        trainer=T.CustomTrainerContainer(image="python", num_nodes=2),
        options=[T.Name("crashes"), T.TrainerCommand(["bash", "-c", "exit 7"])],
    )
    assert name == "crashes"
    with pytest.raises(RuntimeError, match="TrainJob crashes is Failed: FailedJobs"):
        client.wait_for_job_status(name, timeout=280, polling_interval=0.5)
    client.delete_job(name)


def test_wait_rejects_unknown_statuses(client: TrainerClient) -> None:
    with pytest.raises(ValueError, match="unknown status"):
        client.wait_for_job_status("x", status={"Finished"})
