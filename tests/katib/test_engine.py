"""Experiments on the local engine, end to end: real API server, controller, executor, processes.

Trials use the port-free ``python-nodes`` runtime (see test_official_optimizer.py).
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from katib_support import experiment
from test_official_optimizer import PYTHON_RUNTIME

from upstream_data import require

pytestmark = [pytest.mark.slow, pytest.mark.timeout(200)]

KATIB = ("kubeflow.org", "v1beta1", "default")


class Cluster:
    def __init__(self, kubeconfig: Path) -> None:
        from kubernetes import client, config

        self.kubeconfig = kubeconfig
        api_client = config.new_client_from_config(str(kubeconfig))
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.custom.create_namespaced_custom_object(*KATIB, "experiments", body)  # type: ignore[no-any-return]

    def experiment(self, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(*KATIB, "experiments", name)  # type: ignore[no-any-return]

    def trials(self, name: str) -> list[dict[str, Any]]:
        return self.custom.list_namespaced_custom_object(
            *KATIB, "trials", label_selector=f"katib.kubeflow.org/experiment={name}"
        )["items"]  # type: ignore[no-any-return]

    def trainjobs(self) -> list[dict[str, Any]]:
        return self.custom.list_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "default", "trainjobs"
        )["items"]  # type: ignore[no-any-return]

    def until(self, what: str, check: Callable[[], Any], timeout: float = 150) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what}")

    def verdict(self, name: str) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            conditions = (self.experiment(name).get("status") or {}).get("conditions") or []
            last = conditions[-1] if conditions else {}
            return last if last.get("type") in ("Succeeded", "Failed") else None

        return self.until(f"experiment {name} to finish", done)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from kubetrain.local.daemon import ensure_daemon, stop_daemon

    home = tmp_path_factory.mktemp("katib-engine")
    info = ensure_daemon(home)
    try:
        plane = Cluster(Path(info.kubeconfig))
        plane.custom.create_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "default", "trainingruntimes", PYTHON_RUNTIME
        )
        yield plane
    finally:
        stop_daemon(home, kill_pods=True)


def command(body: dict[str, Any], *argv: str) -> dict[str, Any]:
    body["spec"]["trialTemplate"]["trialSpec"]["spec"]["trainer"]["command"] = list(argv)
    return body


def test_a_bad_experiment_is_refused_by_the_api_server_with_katibs_message(
    cluster: Cluster,
) -> None:
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as refused:
        cluster.create(experiment("bad", maxTrialCount=2, parallelTrialCount=3))
    assert refused.value.status == 403
    assert (
        "spec.parallelTrialCount: Invalid value: 3: should be less than or equal to spec.maxTrialCount"
        in str(refused.value.body)
    )


def test_failing_trials_fail_the_experiment_past_max_failed_trial_count(cluster: Cluster) -> None:
    body = command(
        experiment("failing", maxTrialCount=3, parallelTrialCount=1, maxFailedTrialCount=1),
        "python",
        "-c",
        "raise SystemExit(3)  # ${trialParameters.lr}",
    )
    cluster.create(body)
    last = cluster.verdict("failing")
    assert (last["type"], last["reason"], last["message"]) == (
        "Failed",
        "ExperimentFailed",
        "Experiment has failed because max failed count has reached",
    )
    trials = cluster.trials("failing")
    assert len(trials) == 1  # nothing more was started after the verdict
    assert trials[0]["status"]["conditions"][-1]["type"] == "Failed"
    assert trials[0]["status"]["conditions"][-1]["reason"].startswith("TrialFailed. Job reason: ")
    status = cluster.experiment("failing")["status"]
    assert (status["trialsFailed"], status["failedTrialList"]) == (
        1,
        [trials[0]["metadata"]["name"]],
    )


def test_progress_reports_are_metrics_without_any_output(cluster: Cluster) -> None:
    script = "from kubetrain import progress\nfor i in range(3):\n    progress.report(step=i + 1, total_steps=3, metrics={'loss': (i + 1) * float('${trialParameters.lr}')})\nprogress.flush()\n"
    cluster.create(
        command(
            experiment("reports", maxTrialCount=1, parallelTrialCount=1), "python", "-c", script
        )
    )
    assert cluster.verdict("reports")["reason"] == "ExperimentMaxTrialsReached"
    (trial,) = cluster.trials("reports")
    lr = float(trial["spec"]["parameterAssignments"][0]["value"])
    (loss,) = trial["status"]["observation"]["metrics"]
    assert float(loss["latest"]) == pytest.approx(3 * lr, rel=1e-3)
    assert trial["status"]["conditions"][-1]["type"] == "Succeeded"


def test_deleting_an_experiment_removes_its_trials_trainjobs_and_processes(
    cluster: Cluster,
) -> None:
    marker = "import time; time.sleep(120.5)  # ${trialParameters.lr}"
    cluster.create(
        command(experiment("doomed", maxTrialCount=4, parallelTrialCount=2), "python", "-c", marker)
    )

    def pods() -> list[Any]:
        found = cluster.core.list_namespaced_pod(
            "default", label_selector="katib.kubeflow.org/trial"
        )
        return [p for p in found.items if p.metadata.name.startswith("doomed-")]

    # Trials really run side by side: both processes at once.
    cluster.until(
        "two trial pods running", lambda: sum(p.status.phase == "Running" for p in pods()) >= 2
    )
    assert len(cluster.trials("doomed")) == 2
    assert len(processes("time.sleep(120.5)")) >= 2
    cluster.custom.delete_namespaced_custom_object(*KATIB, "experiments", "doomed")
    cluster.until("the trials to go", lambda: not cluster.trials("doomed"))
    cluster.until(
        "the trainjobs to go",
        lambda: not [j for j in cluster.trainjobs() if j["metadata"]["name"].startswith("doomed-")],
    )
    cluster.until("the pods to go", lambda: not pods())
    cluster.until("the processes to end", lambda: not processes("time.sleep(120.5)"))


def processes(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def captured(name: str) -> dict[str, Any]:
    path = require(f"reference/optimizer-bodies/{name}")
    return yaml.safe_load(path.read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "name",
    [
        "01-random-loguniform-choice-maximize.yaml",
        "02-defaults-uniform-only.yaml",
        "03-grid-two-objectives-initializer.yaml",
    ],
)
def test_the_sdks_captured_bodies_are_accepted_and_defaulted(cluster: Cluster, name: str) -> None:
    body = captured(name)
    sent = copy.deepcopy(body)
    body["spec"]["maxTrialCount"] = 1 if "grid" not in name else body["spec"]["maxTrialCount"]
    body["spec"]["parallelTrialCount"] = 1
    body["spec"].pop("maxFailedTrialCount", None)
    made = cluster.create(body)
    spec = made["spec"]
    assert spec["trialTemplate"]["trialSpec"] == sent["spec"]["trialTemplate"]["trialSpec"]
    assert spec["metricsCollectorSpec"] == {"collector": {"kind": "StdOut"}}
    assert spec["resumePolicy"] == "Never"
    cluster.custom.delete_namespaced_custom_object(*KATIB, "experiments", made["metadata"]["name"])


def test_grid_without_steps_fails_as_on_katib(cluster: Cluster) -> None:
    body = captured("03-grid-two-objectives-initializer.yaml")
    body["metadata"]["name"] = "grid-no-step"
    cluster.create(body)
    last = cluster.verdict("grid-no-step")
    assert (last["type"], last["reason"]) == ("Failed", "ExperimentFailed")
    assert (
        last["message"]
        == "Suggestion has failed: Param lr step is nil; For discrete search space, all parameters must include step"
    )
    assert cluster.trials("grid-no-step") == []


def bowl(lr: float, layers: int) -> None:
    """Parameters arrive typed from kubetrain's OptimizerClient."""
    assert isinstance(lr, float) and isinstance(layers, int), (lr, layers)
    print(f"loss={(lr - 0.3) ** 2 + (layers - 2) ** 2}", flush=True)


def test_kubetrains_optimizer_client_passes_typed_values_and_raises_on_failure(
    cluster: Cluster,
) -> None:
    from kubetrain.client import CustomTrainer, KubernetesBackendConfig, OptimizerClient
    from kubetrain.client.optimizer import (
        Objective,
        Search,
        TrainJobTemplate,
        TrialConfig,
        TuningAlgorithm,
    )

    with OptimizerClient(
        KubernetesBackendConfig(config_file=str(cluster.kubeconfig), namespace="default")
    ) as client:
        template = TrainJobTemplate(CustomTrainer(func=bowl, num_nodes=1), runtime="python-nodes")
        name = client.optimize(
            template,
            search_space={"lr": Search.uniform(0.0, 1.0), "layers": Search.int_uniform(1, 3)},
            trial_config=TrialConfig(num_trials=4, parallel_trials=2, max_failed_trials=0),
            objectives=[Objective("loss", "minimize")],
            algorithm=TuningAlgorithm("tpe", {"random_state": 5}),
        )
        job = client.wait_for_job_status(name, timeout=120, polling_interval=0.5)
        assert [t.status for t in job.trials] == ["Succeeded"] * 4
        best = client.get_best_results(name)
        assert (
            best is not None
            and isinstance(best.parameters["lr"], float)
            and isinstance(best.parameters["layers"], int)
        )
        assert float(best.metrics[0].latest) == min(float(t.metrics[0].latest) for t in job.trials)
        # A trial whose values break the function: the search fails, and says why.
        failing = client.optimize(
            template,
            search_space={"lr": Search.choice(["x"]), "layers": Search.int_uniform(1, 3)},
            trial_config=TrialConfig(num_trials=2, parallel_trials=1, max_failed_trials=0),
        )
        with pytest.raises(
            RuntimeError,
            match=r"Experiment .* is Failed: Experiment has failed because max failed count has reached",
        ):
            client.wait_for_job_status(failing, timeout=120, polling_interval=0.5)
        client.delete_job(name)
        assert name not in [j.name for j in client.list_jobs()]


def test_medianstop_stops_a_trial_worse_than_the_finished_ones(cluster: Cluster) -> None:
    # Grid with random_state 1 tries lr=0.1 first (it succeeds), then 0.9, which reports a
    # worse loss at its second report and would then sleep for two minutes.
    script = (
        "import time\nv = float('${trialParameters.lr}')\n"
        "for _ in range(3):\n    print(f'loss={v}', flush=True)\n    time.sleep(0.3)\n"
        "time.sleep(120 if v > 0.5 else 0)\n"
    )
    body = command(
        experiment(
            "stopper",
            algorithm={"algorithmName": "grid", "algorithmSettings": [{"name": "random_state", "value": "1"}]},
            maxTrialCount=2,
            parallelTrialCount=1,
            parameters=[{"name": "lr", "parameterType": "categorical", "feasibleSpace": {"list": ["0.1", "0.9"]}}],
            earlyStopping={"algorithmName": "medianstop", "algorithmSettings": [{"name": "min_trials_required", "value": "1"}, {"name": "start_step", "value": "2"}]},
        ),
        "python", "-c", script,
    )  # fmt: skip
    started = time.monotonic()
    cluster.create(body)
    assert cluster.verdict("stopper")["reason"] == "ExperimentMaxTrialsReached"
    assert time.monotonic() - started < 100
    by_lr = {t["spec"]["parameterAssignments"][0]["value"]: t for t in cluster.trials("stopper")}
    first, second = by_lr["0.1"], by_lr["0.9"]
    assert first["status"]["conditions"][-1]["type"] == "Succeeded"
    assert second["spec"]["earlyStoppingRules"] == [
        {"name": "loss", "value": "0.1", "comparison": "greater", "startStep": 2}
    ]
    assert (
        second["status"]["conditions"][-1]["type"],
        second["status"]["conditions"][-1]["reason"],
    ) == ("EarlyStopped", "TrialEarlyStopped")
    assert cluster.experiment("stopper")["status"]["trialsEarlyStopped"] == 1
    cluster.until(
        "the stopped trial's process to end", lambda: not processes("time.sleep(120 if v")
    )


def test_the_cli_tunes_lists_describes_and_deletes_an_experiment(
    cluster: Cluster, tmp_path: Path
) -> None:
    import sys

    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(experiment("cli-search", maxTrialCount=2, parallelTrialCount=2)))

    def kubetrain(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kubetrain.cli.main", *argv, "--kubeconfig", str(cluster.kubeconfig)],
            capture_output=True, text=True, timeout=150,
        )  # fmt: skip

    tuned = kubetrain("tune", "-f", str(path))
    assert tuned.returncode == 0, tuned.stderr
    assert "experiment.kubeflow.org/cli-search created" in tuned.stdout
    assert (
        "experiment cli-search Complete: Experiment has succeeded because max trial count has reached; best loss="
        in tuned.stdout
    )
    listed = kubetrain("get", "experiments").stdout
    assert listed.split("\n")[0].split() == [
        "NAME",
        "STATE",
        "ALGORITHM",
        "TRIALS",
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "BEST",
        "AGE",
    ]
    (row,) = [line.split()[:7] for line in listed.splitlines() if line.startswith("cli-search ")]
    assert row == ["cli-search", "Complete", "random", "2/2", "0", "2", "0"]
    trials = kubetrain("get", "trials").stdout
    assert trials.count("cli-search-") == 2 and "Succeeded" in trials
    described = kubetrain("describe", "experiment", "cli-search").stdout
    assert "Objective:     minimize loss" in described and "Best trial:" in described
    deleted = kubetrain("delete", "experiment", "cli-search")
    assert deleted.returncode == 0, deleted.stderr
    assert 'experiment.kubeflow.org "cli-search" deleted' in deleted.stdout
    assert not [j for j in cluster.trainjobs() if j["metadata"]["name"].startswith("cli-search-")]


@pytest.mark.parametrize(
    ("fmt", "line"),
    [
        pytest.param("TEXT", "loss={v}", id="TEXT lines"),
        pytest.param("JSON", '{{"loss": "{v}"}}', id="JSON lines with string values"),
    ],
)
def test_the_file_collector_reads_the_metrics_file_the_trial_writes(
    cluster: Cluster, fmt: str, line: str
) -> None:
    name = f"file-{fmt.lower()}"
    script = (
        "v = float('${trialParameters.lr}')\n"
        f"open('/var/log/katib/metrics.log', 'w').write(f'{line}\\n')\n"
        "print('loss=999 on stdout is not the file', flush=True)\n"
    )
    collector = {
        "collector": {"kind": "File"},
        "source": {
            "fileSystemPath": {"path": "/var/log/katib/metrics.log", "kind": "File", "format": fmt}
        },
    }
    cluster.create(
        command(
            experiment(name, maxTrialCount=1, parallelTrialCount=1, metricsCollectorSpec=collector),
            "python",
            "-c",
            script,
        )
    )
    assert cluster.verdict(name)["reason"] == "ExperimentMaxTrialsReached"
    (trial,) = cluster.trials(name)
    lr = float(trial["spec"]["parameterAssignments"][0]["value"])
    (loss,) = trial["status"]["observation"]["metrics"]
    assert float(loss["latest"]) == pytest.approx(lr)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_prints_katibs_columns(cluster: Cluster) -> None:
    cluster.create(experiment("columns", maxTrialCount=1, parallelTrialCount=1))
    cluster.verdict("columns")
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "get", "experiment,suggestion", "columns"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert out[0].split() == ["NAME", "TYPE", "STATUS", "AGE"]
    assert out[1].split()[:3] == ["experiment.kubeflow.org/columns", "Succeeded", "True"]
    assert out[3].split() == ["NAME", "TYPE", "STATUS", "REQUESTED", "ASSIGNED", "AGE"]
    assert out[4].split()[:5] == ["suggestion.kubeflow.org/columns", "Succeeded", "True", "1", "1"]
