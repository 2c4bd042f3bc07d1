"""kubetrain apply/get/describe/logs/events/suspend/resume/delete against the real embedded API server.

The server runs in-process (no controller, no executor): pods and events are created through the
API the way the executor and controller would create them, and log files are written where the
executor writes them, so each command is exercised end to end over HTTP.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api.schema import crd_manifests
from kubetrain.local.apiserver import ApiServer, ServerThread
from kubetrain.runtime.defaults import default_runtimes

# A stuck stream must fail the test, never hang the suite.
pytestmark = pytest.mark.timeout(30)

_counter = itertools.count()


@dataclass
class Api:
    home: Path
    kubeconfig: str
    client: Any  # lightkube.Client, for arranging what a controller/executor would have made


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    from lightkube import Client, KubeConfig

    home = tmp_path_factory.mktemp("home")
    thread = ServerThread(
        lambda: ApiServer(home, in_memory=True, crds=crd_manifests(), seed_objects=default_runtimes)
    )
    thread.start()
    kubeconfig = thread.write_kubeconfig(home / "kubeconfig")
    client = Client(KubeConfig.from_file(kubeconfig), field_manager="test")
    try:
        yield Api(home, str(kubeconfig), client)
    finally:
        client.close()
        thread.stop()


@pytest.fixture
def ns(api: Api) -> str:
    """A fresh namespace per test, so listings only show what the test made."""
    from lightkube.resources.core_v1 import Namespace

    name = f"t{next(_counter)}"
    api.client.create(Namespace.from_dict({"metadata": {"name": name}}))
    return name


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(api: Api, ns: str, capsys: pytest.CaptureFixture[str]) -> Any:
    """``cli("get", "trainjobs")`` runs one command against the test server and namespace."""

    def run(*argv: str, namespaced: bool = True) -> Run:
        from kubetrain.cli import main as entry

        extra = ["--kubeconfig", api.kubeconfig] + (["-n", ns] if namespaced else [])
        capsys.readouterr()
        if argv[0] in entry.COMMANDS:
            code = entry.main([*argv, *extra])
        else:  # until main.py lists the command: the same parser shape main builds
            module = importlib.import_module(f"kubetrain.cli.cmd_{argv[0]}")
            parser = argparse.ArgumentParser(prog=f"kubetrain {argv[0]}")
            module.add_arguments(parser)
            code = module.run(parser.parse_args([*argv[1:], *extra]))
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


def write_job(tmp_path: Path, name: str = "demo", nodes: int = 2, extra: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n"
        f"metadata: {{name: {name}}}\n"
        f"spec:\n  runtimeRef: {{name: torch-distributed}}\n  trainer: {{numNodes: {nodes}}}\n{extra}"
    )
    return path


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def make_pod(
    api: Api,
    ns: str,
    job: str,
    index: int,
    *,
    phase: str = "Running",
    exit_code: int | None = None,
    restarts: int = 0,
    owner_uid: str | None = None,
) -> str:
    """A node pod as the executor creates it: JobSet labels, container ``node``, a phase."""
    from lightkube.resources.core_v1 import Pod
    from lightkube.types import PatchType

    name = f"{job}-node-0-{index}"
    labels = {
        "jobset.sigs.k8s.io/jobset-name": job,
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "batch.kubernetes.io/job-completion-index": str(index),
    }
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels}
    if owner_uid:
        meta["ownerReferences"] = [
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "name": job,
                "uid": owner_uid,
            }
        ]
    api.client.create(
        Pod.from_dict({"metadata": meta, "spec": {"containers": [{"name": "node", "image": "x"}]}})
    )
    state: dict[str, Any] = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    if exit_code is not None:
        state = {
            "terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}
        }
    status = {
        "phase": phase,
        "containerStatuses": [
            {"name": "node", "ready": phase == "Running", "restartCount": restarts, "image": "x",
             "imageID": "", "state": state}
        ],
    }  # fmt: skip
    api.client.patch(Pod.Status, name, {"status": status}, namespace=ns, patch_type=PatchType.MERGE)
    return name


def _now(offset: int = 0) -> str:
    """An Event time ``offset`` seconds from now (Events older than their job are not its own)."""
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_log(api: Api, ns: str, pod: str, lines: list[str], container: str = "node") -> None:
    """Where the executor writes a container's output and the API server's pods/log reads it."""
    path = api.home / "logs" / ns / pod / f"{container}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


# --- apply ---------------------------------------------------------------------------------------


def test_apply_reports_created_then_unchanged_then_configured(cli: Any, tmp_path: Path) -> None:
    path = write_job(tmp_path)
    assert cli("apply", "-f", str(path)).out == "trainjob.trainer.kubeflow.org/demo created\n"
    assert cli("apply", "-f", str(path)).out == "trainjob.trainer.kubeflow.org/demo unchanged\n"
    write_job(tmp_path, extra="  activeDeadlineSeconds: 600\n")
    assert cli("apply", "-f", str(path)).out == "trainjob.trainer.kubeflow.org/demo configured\n"


def test_apply_takes_folders_and_multi_document_files(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        write_job(tmp_path, "one").read_text() + "---\n" + write_job(tmp_path, "two").read_text()
    )
    (tmp_path / "one.yaml").unlink()
    (tmp_path / "two.yaml").unlink()
    (tmp_path / "b.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {lr: '0.1'}\n"
    )
    done = cli("apply", "-f", str(tmp_path))
    assert (done.code, done.out.splitlines()) == (
        0,
        [
            "trainjob.trainer.kubeflow.org/one created",
            "trainjob.trainer.kubeflow.org/two created",
            "configmap/settings created",
        ],
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "kind: TrainJob\nmetadata: {name: x}\n",
            "apiVersion: Required value",
            id="a missing apiVersion is named",
        ),
        pytest.param("apiVersion: [\n", "line 2", id="broken YAML names the line"),
        pytest.param(
            "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\n"
            "spec:\n  runtimeRef: {name: torch-distributed}\n  trainer: {numNodes: two}\n",
            "spec.trainer.numNodes",
            id="a wrong field type names the field path",
        ),
        pytest.param(
            "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJobb\nmetadata: {name: x}\n",
            "did you mean TrainJob",
            id="a misspelt kind suggests the right one",
        ),
    ],
)
def test_a_bad_file_is_one_clear_error_and_stores_nothing(
    cli: Any, ns: str, tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    done = cli("apply", "-f", str(path))
    assert done.code == 1
    assert done.err.startswith(f"error: {path}")
    assert expected in done.err
    assert "Traceback" not in done.err
    assert cli("get", "trainjobs").err == f"No resources found in {ns} namespace.\n"


def test_a_missing_file_is_an_error(cli: Any, tmp_path: Path) -> None:
    done = cli("apply", "-f", str(tmp_path / "nope.yaml"))
    assert done.code == 1
    assert "nope.yaml" in done.err
    assert "Traceback" not in done.err


def test_the_server_rejecting_an_object_is_one_line_naming_it(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "ns.yaml"
    # The namespace does not exist: the server's 404 must name it, not dump a traceback.
    path.write_text(
        write_job(tmp_path)
        .read_text()
        .replace("metadata: {name: demo}", "metadata: {name: demo, namespace: nowhere}")
    )
    done = cli("apply", "-f", str(path))
    assert done.code == 1
    assert done.err.count("\n") == 1
    assert "nowhere" in done.err


# --- get -----------------------------------------------------------------------------------------


def test_get_trainjobs_is_a_table_with_state_runtime_and_nodes(cli: Any, tmp_path: Path) -> None:
    cli("apply", "-f", str(write_job(tmp_path, "alpha", nodes=3)))
    cli("apply", "-f", str(write_job(tmp_path, "beta", nodes=1)))
    rows = table(cli("get", "trainjobs").out)
    assert rows[0] == ["NAME", "STATE", "RUNTIME", "NODES", "PROGRESS", "ETA", "AGE"]
    assert [r[:4] for r in rows[1:]] == [
        ["alpha", "Created", "torch-distributed", "3"],
        ["beta", "Created", "torch-distributed", "1"],
    ]


@pytest.mark.parametrize(
    ("fmt", "parse"),
    [pytest.param("json", json.loads, id="json"), pytest.param("yaml", yaml.safe_load, id="yaml")],
)
def test_get_output_round_trips_through_apply(
    cli: Any, tmp_path: Path, fmt: str, parse: Any
) -> None:
    cli("apply", "-f", str(write_job(tmp_path)))
    one = parse(cli("get", "trainjob", "demo", "-o", fmt).out)
    assert (one["kind"], one["metadata"]["name"], one["spec"]["trainer"]["numNodes"]) == (
        "TrainJob",
        "demo",
        2,
    )
    listed = parse(cli("get", "trainjobs", "-o", fmt).out)
    assert (listed["kind"], [i["metadata"]["name"] for i in listed["items"]]) == ("List", ["demo"])
    again = tmp_path / f"again.{fmt}"
    again.write_text(cli("get", "trainjob", "demo", "-o", fmt).out)
    # Applying the printed object takes co-ownership of its defaulted fields (a change of
    # managedFields only); the spec stays as it was and applying it once more changes nothing.
    assert cli("apply", "-f", str(again)).code == 0
    assert cli("apply", "-f", str(again)).out == "trainjob.trainer.kubeflow.org/demo unchanged\n"
    assert parse(cli("get", "trainjob", "demo", "-o", fmt).out)["spec"] == one["spec"]


def test_get_names_are_kind_qualified(cli: Any, tmp_path: Path) -> None:
    cli("apply", "-f", str(write_job(tmp_path)))
    assert cli("get", "tj", "-o", "name").out == "trainjob.trainer.kubeflow.org/demo\n"


def test_get_runtimes_shows_both_kinds_with_their_framework(cli: Any) -> None:
    rows = table(cli("get", "runtimes").out)
    assert rows[0] == ["NAME", "KIND", "FRAMEWORK", "NODES", "AGE"]
    assert ["torch-distributed", "ClusterTrainingRuntime", "torch", "1"] in [r[:4] for r in rows]
    assert table(cli("get", "clustertrainingruntimes").out)[0] == [
        "NAME",
        "FRAMEWORK",
        "NODES",
        "AGE",
    ]


def test_get_pods_shows_phase_and_restarts(api: Api, ns: str, cli: Any) -> None:
    make_pod(api, ns, "demo", 0, restarts=2)
    rows = table(cli("get", "pods").out)
    assert rows[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert rows[1][:4] == ["demo-node-0-0", "1/1", "Running", "2"]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        pytest.param(
            ("get", "trainjob", "nope"),
            1,
            'trainjobs.trainer.kubeflow.org "nope" not found',
            id="a missing job is not found, exit 1",
        ),
        pytest.param(
            ("get", "widgets"),
            2,
            'unknown resource type "widgets"',
            id="an unknown kind is a usage error, exit 2",
        ),
        pytest.param(
            ("describe", "trainjob", "nope"),
            1,
            '"nope" not found',
            id="describe of a missing job, exit 1",
        ),
        pytest.param(("logs", "nope"), 1, '"nope" not found', id="logs of a missing job, exit 1"),
        pytest.param(
            ("events", "nope"), 1, '"nope" not found', id="events of a missing job, exit 1"
        ),
        pytest.param(
            ("suspend", "nope"), 1, '"nope" not found', id="suspend of a missing job, exit 1"
        ),
        pytest.param(
            ("delete", "nope"), 1, '"nope" not found', id="delete of a missing job, exit 1"
        ),
    ],
)
def test_errors_are_one_line_with_a_meaningful_exit_code(
    cli: Any, argv: tuple[str, ...], code: int, message: str
) -> None:
    done = cli(*argv)
    assert done.code == code
    assert message in done.err
    assert done.err.startswith("error: ") and done.err.count("\n") == 1


def test_no_trainjobs_says_so_on_stderr(cli: Any, ns: str) -> None:
    done = cli("get", "trainjobs")
    assert (done.code, done.out, done.err) == (0, "", f"No resources found in {ns} namespace.\n")


def test_a_watch_from_a_lists_version_sees_only_later_changes(
    api: Api, ns: str, tmp_path: Path
) -> None:
    from kubetrain.client import resources as R
    from kubetrain.client.connection import connect
    from kubetrain.client.jobs import JobClient

    jc = JobClient(connect(kubeconfig=api.kubeconfig, namespace=ns))
    jc.apply_one(yaml.safe_load(write_job(tmp_path, "before").read_text()))
    listed, version = jc.objects_at(R.TRAINJOB)
    assert [o["metadata"]["name"] for o in listed] == ["before"] and version
    seen: list[tuple[str, str]] = []

    def watch() -> None:
        for kind, obj in jc.watch(R.TRAINJOB, resource_version=version):
            seen.append((kind, obj["metadata"]["name"]))
            if len(seen) == 2:
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    time.sleep(0.3)
    jc.apply_one(yaml.safe_load(write_job(tmp_path, "watched").read_text()))
    jc.set_suspend("watched", True)
    thread.join(timeout=10)
    jc.close()
    assert seen == [("ADDED", "watched"), ("MODIFIED", "watched")]


# --- suspend / resume ----------------------------------------------------------------------------


def test_suspend_and_resume_flip_the_state(cli: Any, tmp_path: Path) -> None:
    cli("apply", "-f", str(write_job(tmp_path)))
    assert cli("suspend", "demo").out == "trainjob.trainer.kubeflow.org/demo suspended\n"
    assert table(cli("get", "trainjobs").out)[1][1] == "Suspended"
    assert "already suspended" in cli("suspend", "demo").out
    assert cli("resume", "demo").out == "trainjob.trainer.kubeflow.org/demo resumed\n"
    assert table(cli("get", "trainjobs").out)[1][1] == "Created"


# --- describe, logs, events ----------------------------------------------------------------------


def test_describe_shows_runtime_steps_and_events(
    api: Api, ns: str, cli: Any, tmp_path: Path
) -> None:
    from lightkube.resources.core_v1 import Event

    cli("apply", "-f", str(write_job(tmp_path)))
    make_pod(api, ns, "demo", 0, phase="Failed", exit_code=3, restarts=1)
    make_pod(api, ns, "demo", 1)
    api.client.create(
        Event.from_dict(
            {
                "metadata": {"name": "demo.1", "namespace": ns},
                "involvedObject": {"kind": "TrainJob", "name": "demo", "namespace": ns},
                "reason": "Created",
                "message": "created JobSet demo",
                "type": "Normal",
                "firstTimestamp": _now(),
                "lastTimestamp": _now(),
            }
        )
    )
    text = cli("describe", "trainjob", "demo").out
    lines = text.splitlines()
    assert "Runtime:    ClusterTrainingRuntime/torch-distributed" in lines
    steps = lines[lines.index("Steps:") + 1 : lines.index("Steps:") + 4]
    assert [s.split() for s in steps] == [
        ["STEP", "POD", "PHASE", "RESTARTS", "EXIT", "CODE", "REASON"],
        ["node-0", "demo-node-0-0", "Failed", "1", "3", "Error"],
        ["node-1", "demo-node-0-1", "Running", "0", "-", "-"],
    ]
    assert "created JobSet demo" in text


def test_logs_reads_rank_zero_from_the_executors_log_file(
    api: Api, ns: str, cli: Any, tmp_path: Path
) -> None:
    cli("apply", "-f", str(write_job(tmp_path)))
    for rank in (0, 1):
        pod = make_pod(api, ns, "demo", rank, phase="Succeeded", exit_code=0)
        write_log(api, ns, pod, [f"rank {rank} epoch {e}" for e in range(3)])
    assert cli("logs", "demo").out == "rank 0 epoch 0\nrank 0 epoch 1\nrank 0 epoch 2\n"
    assert cli("logs", "demo", "--rank", "1", "--tail", "1").out == "rank 1 epoch 2\n"
    assert cli("logs", "demo", "-f").out.splitlines()[-1] == "rank 0 epoch 2"
    merged = cli("logs", "demo", "--all-ranks").out.splitlines()
    assert sorted(merged) == sorted(
        f"[node-{r}] rank {r} epoch {e}" for r in (0, 1) for e in range(3)
    )


def test_logs_of_a_step_that_does_not_exist_lists_the_steps(
    api: Api, ns: str, cli: Any, tmp_path: Path
) -> None:
    cli("apply", "-f", str(write_job(tmp_path)))
    make_pod(api, ns, "demo", 0)
    done = cli("logs", "demo", "--step", "dataset-initializer")
    assert (done.code, done.err) == (
        1,
        'error: trainjob "demo" has no step dataset-initializer (steps: node-0)\n',
    )


def test_events_lists_the_jobs_and_its_pods_events_only(
    api: Api, ns: str, cli: Any, tmp_path: Path
) -> None:
    from lightkube.resources.core_v1 import Event

    cli("apply", "-f", str(write_job(tmp_path)))
    pod = make_pod(api, ns, "demo", 0)
    for i, (kind, name, reason, when) in enumerate(
        [
            ("TrainJob", "demo", "Created", _now(1)),
            ("Pod", pod, "Started", _now(2)),
            ("TrainJob", "other", "Created", _now(3)),
            # An earlier job of the same name: older than this one, so not shown.
            ("TrainJob", "demo", "Deleted", "2020-01-01T00:00:00Z"),
        ]
    ):
        api.client.create(
            Event.from_dict(
                {
                    "metadata": {"name": f"e{i}", "namespace": ns},
                    "involvedObject": {"kind": kind, "name": name, "namespace": ns},
                    "reason": reason,
                    "message": f"{reason} {name}",
                    "type": "Normal",
                    "lastTimestamp": when,
                }
            )
        )
    rows = table(cli("events", "demo").out)
    assert rows[0] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert [r[-4:] for r in rows[1:]] == [
        ["Created", "trainjob/demo", "Created", "demo"],
        ["Started", f"pod/{pod}", "Started", pod],
    ]


# --- delete --------------------------------------------------------------------------------------


def test_delete_waits_until_every_pod_is_gone(api: Api, ns: str, cli: Any, tmp_path: Path) -> None:
    cli("apply", "-f", str(write_job(tmp_path)))
    uid = json.loads(cli("get", "trainjob", "demo", "-o", "json").out)["metadata"]["uid"]
    make_pod(api, ns, "demo", 0, owner_uid=uid)
    make_pod(api, ns, "demo", 1, owner_uid=uid)
    done = cli("delete", "demo", "--timeout", "5")
    assert (done.code, done.out) == (0, 'trainjob.trainer.kubeflow.org "demo" deleted\n')
    assert cli("get", "pods").err == f"No resources found in {ns} namespace.\n"


def test_delete_says_when_pods_outlive_the_timeout(
    api: Api, ns: str, cli: Any, tmp_path: Path
) -> None:
    cli("apply", "-f", str(write_job(tmp_path)))
    make_pod(api, ns, "demo", 0)  # no owner: nothing will remove it
    done = cli("delete", "demo", "--timeout", "0.3")
    assert done.code == 1
    assert done.err == 'error: trainjob "demo": 1 pod(s) still present after 0.3s\n'


def test_delete_from_a_file(cli: Any, tmp_path: Path) -> None:
    path = write_job(tmp_path)
    cli("apply", "-f", str(path))
    assert cli("delete", "-f", str(path)).out == 'trainjob.trainer.kubeflow.org "demo" deleted\n'
    assert cli("get", "trainjob", "demo").code == 1


# --- connection ----------------------------------------------------------------------------------


def test_an_unknown_context_is_a_clear_error(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    from kubetrain.cli import cmd_get

    parser = argparse.ArgumentParser()
    cmd_get.add_arguments(parser)
    code = cmd_get.run(
        parser.parse_args(["trainjobs", "--kubeconfig", api.kubeconfig, "--context", "nope"])
    )
    assert (code, capsys.readouterr().err) == (1, "error: kubeconfig: Context 'nope' not found\n")


def test_an_unreachable_server_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kubetrain.cli import cmd_get

    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c"}}],
                "current-context": "c",
            }
        )
    )
    parser = argparse.ArgumentParser()
    cmd_get.add_arguments(parser)
    code = cmd_get.run(parser.parse_args(["trainjobs", "--kubeconfig", str(config)]))
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("error: cannot reach the Kubernetes API at http://127.0.0.1:9: ")
    assert err.count("\n") == 1


def test_logs_follow_streams_until_the_pod_ends(
    api: Api, ns: str, cli: Any, tmp_path: Path
) -> None:
    from lightkube.resources.core_v1 import Pod
    from lightkube.types import PatchType

    cli("apply", "-f", str(write_job(tmp_path)))
    pod = make_pod(api, ns, "demo", 0)
    write_log(api, ns, pod, ["first"])
    log = api.home / "logs" / ns / pod / "node.log"

    def finish() -> None:
        time.sleep(0.5)
        with log.open("a") as fh:
            fh.write("second\n")
        time.sleep(0.5)
        api.client.patch(
            Pod.Status,
            pod,
            {"status": {"phase": "Succeeded"}},
            namespace=ns,
            patch_type=PatchType.MERGE,
        )

    writer = threading.Thread(target=finish)
    writer.start()
    start = time.monotonic()
    done = cli("logs", "demo", "-f")
    writer.join()
    assert (done.code, done.out) == (0, "first\nsecond\n")
    assert time.monotonic() - start >= 1.0  # it waited for the pod, not just the file's end


def test_trainer_client_sends_the_sdks_trainjob_to_a_cluster(api: Api, ns: str) -> None:
    from lightkube.generic_resource import create_namespaced_resource

    from kubetrain.client import types as T
    from kubetrain.client.trainer_client import TrainerClient

    trainjobs = create_namespaced_resource(
        "trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs"
    )

    def train(lr: float, epochs: int = 1) -> None:
        print(lr, epochs)

    with TrainerClient(T.KubernetesBackendConfig(namespace=ns, config_file=api.kubeconfig)) as sdk:
        name = sdk.train(
            trainer=T.CustomTrainer(
                func=train,
                func_args={"lr": 0.1},
                num_nodes=2,
                resources_per_node={"cpu": 2, "memory": "4Gi"},
                env={"LOG_LEVEL": "debug"},
            ),
            options=[T.Labels({"team": "ml"})],
        )
        assert len(name) == 12 and name[0].isalpha()
        job = sdk.get_job(name)
        assert (job.status, job.num_nodes, job.runtime and job.runtime.name) == (
            "Created",
            2,
            "torch-distributed",
        )
        assert [j.name for j in sdk.list_jobs()] == [name]
        sent = api.client.get(trainjobs, name, namespace=ns).to_dict()
        trainer = sent["spec"]["trainer"]
        assert trainer["numNodes"] == 2
        assert trainer["resourcesPerNode"]["limits"] == {"cpu": 2, "memory": "4Gi"}
        assert trainer["env"] == [{"name": "LOG_LEVEL", "value": "debug"}]
        assert "train(**{'lr': 0.1})" in trainer["command"][-1]
        assert sent["metadata"]["labels"] == {"team": "ml"}
        sdk.delete_job(name, timeout=5)
        assert sdk.list_jobs() == []


@pytest.mark.parametrize("command", ["apply", "delete"])
def test_an_unknown_kind_in_a_file_is_a_clear_error(cli: Any, tmp_path: Path, command: str) -> None:
    path = tmp_path / "widget.yaml"
    path.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    done = cli(command, "-f", str(path))
    assert done.code == 1
    assert done.err.startswith("error: unknown kind 'Widget' (apiVersion 'example.com/v1')")
    assert "Traceback" not in done.err


def _four_documents(tmp_path: Path) -> Path:
    """Four TrainJobs; the third has a label key Kubernetes refuses."""
    docs = [write_job(tmp_path, f"multi-{i}", 1).read_text() for i in range(4)]
    docs[2] = docs[2].replace(
        "metadata: {name: multi-2}", "metadata: {name: multi-2, labels: {'bad key!': x}}"
    )
    path = tmp_path / "four.yaml"
    path.write_text("---\n".join(docs))
    return path


def test_finding_6_apply_checks_every_document_first_and_applies_nothing_if_one_is_bad(
    cli: Any, ns: str, tmp_path: Path
) -> None:
    done = cli("apply", "-f", str(_four_documents(tmp_path)))
    assert done.code == 1
    assert "document 3 (TrainJob multi-2): metadata.labels" in done.err
    assert "nothing applied" in done.err
    assert cli("get", "trainjobs").err == f"No resources found in {ns} namespace.\n"


def test_finding_6_continue_on_error_applies_the_others_as_kubectl_does(
    cli: Any, tmp_path: Path
) -> None:
    done = cli("apply", "-f", str(_four_documents(tmp_path)), "--continue-on-error")
    assert done.code == 1
    assert "document 3 (TrainJob multi-2)" in done.err
    names = [row[0] for row in table(cli("get", "trainjobs").out)[1:]]
    assert names == ["multi-0", "multi-1", "multi-3"]


def test_finding_6_validate_checks_metadata_and_runtime_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kubetrain.cli.main import main

    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\n"
        "metadata: {name: Bad_Name}\nspec: {template: {spec: {replicatedJobs: [{name: node, template: "
        "{spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}\n"
        "---\n"
        + write_job(tmp_path, "nameless")
        .read_text()
        .replace("metadata: {name: nameless}", "metadata: {annotations: {'a b': c}}")
    )
    assert main(["validate", "-f", str(path)]) == 1
    err = capsys.readouterr().err
    assert (
        'ClusterTrainingRuntime Bad_Name: metadata.name: "Bad_Name": a lowercase RFC 1123 subdomain'
        in err
    )
    assert "metadata.name: Required value: name or generateName is required" in err
    assert "metadata.annotations" in err


def test_finding_10_logs_of_a_finished_job_without_pods_says_why(
    api: Api, ns: str, cli: Any, tmp_path: Path
) -> None:
    from lightkube.generic_resource import create_namespaced_resource
    from lightkube.types import PatchType

    cli("apply", "-f", str(write_job(tmp_path, "gone")))
    trainjob = create_namespaced_resource(
        "trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs"
    )
    failed = {"type": "Failed", "status": "True", "reason": "JobSetFailed",
              "message": "node-0 exited 1", "lastTransitionTime": _now()}  # fmt: skip
    api.client.patch(
        trainjob.Status, "gone", {"status": {"conditions": [failed]}}, namespace=ns,
        patch_type=PatchType.MERGE,
    )  # fmt: skip
    done = cli("logs", "gone")
    assert done.code == 1
    assert done.err == (
        'error: trainjob "gone" is Failed: JobSetFailed: node-0 exited 1; its pods and their '
        "logs are gone\n"
    )


def test_finding_10_logs_refuses_a_negative_tail(cli: Any) -> None:
    with pytest.raises(SystemExit) as usage:
        cli("logs", "any", "--tail", "-5")
    assert usage.value.code == 2


# --- which jobs: kubectl's argument forms for delete, suspend, resume -----------------------------


@pytest.mark.parametrize(
    ("argv", "gone"),
    [
        pytest.param(("delete", "trainjob", "a"), ["a"], id="delete trainjob NAME deletes just that one"),
        pytest.param(("delete", "trainjobs", "a", "b"), ["a", "b"], id="delete trainjobs NAME NAME"),
        pytest.param(("delete", "tj/a", "trainjob/b"), ["a", "b"], id="delete KIND/NAME forms"),
        pytest.param(("delete", "a"), ["a"], id="delete NAME: a TrainJob"),
        pytest.param(("delete", "--all"), ["a", "b", "c"], id="delete --all: every TrainJob"),
        pytest.param(("delete", "trainjobs", "--all"), ["a", "b", "c"], id="delete trainjobs --all"),
    ],
)  # fmt: skip
def test_delete_takes_names_as_kubectl_does(
    cli: Any, tmp_path: Path, argv: tuple[str, ...], gone: list[str]
) -> None:
    for name in ("a", "b", "c"):
        cli("apply", "-f", str(write_job(tmp_path, name)))
    done = cli(*argv, "--timeout", "5")
    assert done.code == 0, done.err
    assert done.out == "".join(f'trainjob.trainer.kubeflow.org "{n}" deleted\n' for n in gone)
    left = [row[0] for row in table(cli("get", "trainjobs").out)[1:]]
    assert left == [n for n in ("a", "b", "c") if n not in gone]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(("delete", "trainjobs"), "resource(s) were provided, but no name was specified", id="a kind without a name"),
        pytest.param(("suspend", "trainingruntime", "x"), "this command acts on trainjobs, not trainingruntimes", id="suspend only knows trainjobs"),
        pytest.param(("delete", "--all", "a"), "give names or --all, not both", id="names and --all"),
        pytest.param(("resume",), "name a TrainJob, or pass --all or -f FILE", id="nothing named"),
    ],
)  # fmt: skip
def test_target_mistakes_are_usage_errors(cli: Any, argv: tuple[str, ...], message: str) -> None:
    done = cli(*argv)
    assert (done.code, done.err) == (2, f"error: {message}\n")


def test_suspend_and_resume_take_the_kind_and_all(cli: Any, tmp_path: Path) -> None:
    for name in ("a", "b"):
        cli("apply", "-f", str(write_job(tmp_path, name)))
    assert cli("suspend", "trainjob", "a").out == "trainjob.trainer.kubeflow.org/a suspended\n"
    assert cli("suspend", "--all").out == (
        "trainjob.trainer.kubeflow.org/a suspended (unchanged: already suspended)\n"
        "trainjob.trainer.kubeflow.org/b suspended\n"
    )
    assert cli("resume", "trainjobs/b").out == "trainjob.trainer.kubeflow.org/b resumed\n"
