"""Container environment and command resolution, as the kubelet does it (pure: no process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sandbox_support import make_ctx, make_pod

from kubetrain.local.sandbox import ImageEnv, ImageMap, SandboxError, expand, resolve_env
from kubetrain.local.sandbox.launch import plan_launch

INDEX = "batch.kubernetes.io/job-completion-index"


def field(path: str) -> dict[str, Any]:
    return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


ENV_CASES = [
    ("metadata.name gives the pod name", {"name": "X", **field("metadata.name")}, {"X": "tj-node-0-1-abcde"}),
    ("metadata.namespace gives the namespace", {"name": "X", **field("metadata.namespace")}, {"X": "team-a"}),
    ("metadata.uid gives the uid", {"name": "X", **field("metadata.uid")}, {"X": "uid-tj-node-0-1-abcde"}),
    ("a label by key", {"name": "X", **field("metadata.labels['app']")}, {"X": "trainer"}),
    ("PET_NODE_RANK from the completion-index annotation",
     {"name": "PET_NODE_RANK", **field(f"metadata.annotations['{INDEX}']")}, {"PET_NODE_RANK": "1"}),
    ("a missing annotation is empty", {"name": "X", **field("metadata.annotations['nope']")}, {"X": ""}),
    ("spec.nodeName defaults to the local node", {"name": "X", **field("spec.nodeName")}, {"X": "kubetrain-local"}),
    ("spec.serviceAccountName defaults to default",
     {"name": "X", **field("spec.serviceAccountName")}, {"X": "default"}),
    ("status.podIP is the pod's own loopback address", {"name": "X", **field("status.podIP")}, {"X": "127.0.0.3"}),
    ("status.hostIP is the host's loopback", {"name": "X", **field("status.hostIP")}, {"X": "127.0.0.1"}),
    ("a ConfigMap key", {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "a"}}}, {"X": "1"}),
    ("a Secret key, decoded", {"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
     {"X": "hunter2"}),
    ("an optional missing key sets nothing",
     {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "zz", "optional": True}}}, {}),
    ("requests.cpu falls back to the limit, in millicores",
     {"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}},
     {"X": "1500"}),
    ("limits.memory in Mi", {"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                                                                            "divisor": "1Mi"}}}, {"X": "2048"}),
]  # fmt: skip


def _pod(env: list[dict[str, Any]], **container: Any) -> dict[str, Any]:
    return make_pod(
        "tj-node-0-1-abcde",
        namespace="team-a",
        labels={"app": "trainer"},
        annotations={INDEX: "1"},
        containers=[{"name": "node", "image": "img", "command": ["true"], "env": env,
                     "resources": {"limits": {"cpu": "1500m", "memory": "2Gi"}}, **container}],
    )  # fmt: skip


def _ctx(tmp_path: Path) -> Any:
    return make_ctx(
        tmp_path, pod_ip="127.0.0.3",
        config_maps={"cm": {"a": "1", "b": "2"}},
        secrets={"s": {"token": b"hunter2"}},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("var", "expected"), [c[1:] for c in ENV_CASES], ids=[c[0] for c in ENV_CASES]
)
def test_env_var_resolution(tmp_path: Path, var: dict[str, Any], expected: dict[str, str]) -> None:
    pod = _pod([var])
    assert resolve_env(pod, pod["spec"]["containers"][0], _ctx(tmp_path)) == expected


EXPAND_CASES = [
    ("a defined variable is replaced", "x=$(A)", "x=1"),
    ("an undefined variable stays as written", "x=$(NOPE)", "x=$(NOPE)"),
    ("$$ escapes a reference", "$$(A)", "$(A)"),
    ("$$ alone is one dollar", "cost $$5", "cost $5"),
    ("a lone $ stays", "a$b $", "a$b $"),
    ("an unclosed reference stays", "$(A", "$(A"),
    ("several references in one string", "$(A):$(B)/$(A)", "1:two/1"),
    ("shell syntax is left for the shell", "${A} $A", "${A} $A"),
]


@pytest.mark.parametrize(
    ("text", "out"), [c[1:] for c in EXPAND_CASES], ids=[c[0] for c in EXPAND_CASES]
)
def test_dollar_paren_expansion(text: str, out: str) -> None:
    assert expand(text, {"A": "1", "B": "two"}) == out


ORDER_CASES = [
    ("an env value sees an earlier env var",
     [{"name": "A", "value": "x"}, {"name": "B", "value": "$(A)-y"}], {"A": "x", "B": "x-y"}),
    ("an env value does not see a later one",
     [{"name": "B", "value": "$(A)-y"}, {"name": "A", "value": "x"}], {"A": "x", "B": "$(A)-y"}),
    ("an env value sees a fieldRef defined before it",
     [{"name": "R", **field(f"metadata.annotations['{INDEX}']")}, {"name": "B", "value": "rank$(R)"}],
     {"R": "1", "B": "rank1"}),
    ("env overrides envFrom, which may carry a prefix",
     [{"name": "CM_a", "value": "mine"}], {"CM_a": "mine", "CM_b": "2"}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("env", "expected"), [c[1:] for c in ORDER_CASES], ids=[c[0] for c in ORDER_CASES]
)
def test_env_order_and_references(
    tmp_path: Path, env: list[dict[str, Any]], expected: dict[str, str]
) -> None:
    pod = _pod(
        env,
        envFrom=[{"configMapRef": {"name": "cm"}, "prefix": "CM_"}] if "CM_a" in expected else [],
    )
    assert resolve_env(pod, pod["spec"]["containers"][0], _ctx(tmp_path)) == expected


ERROR_CASES = [
    ("a missing ConfigMap", {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "a"}}},
     "configmap 'gone' not found"),
    ("a missing Secret key", {"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "nope"}}},
     "key 'nope' in secret 's' not found"),
    ("an unknown fieldPath", {"name": "X", **field("spec.bogus")}, "unsupported fieldRef"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("var", "message"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_env_errors_name_what_is_missing(tmp_path: Path, var: dict[str, Any], message: str) -> None:
    pod = _pod([var])
    with pytest.raises(SandboxError, match=message) as err:
        resolve_env(pod, pod["spec"]["containers"][0], _ctx(tmp_path))
    assert err.value.reason == "CreateContainerConfigError"


def test_command_and_args_are_expanded_with_the_final_env(tmp_path: Path) -> None:
    pod = _pod(
        [{"name": "PET_NODE_RANK", **field(f"metadata.annotations['{INDEX}']")}],
        command=["torchrun", "--node-rank=$(PET_NODE_RANK)"], args=["train.py", "$(UNSET)"],
    )  # fmt: skip
    launch = plan_launch(pod, pod["spec"]["containers"][0], _ctx(tmp_path), {}, "bwrap")
    assert launch.command == ["torchrun", "--node-rank=1", "train.py", "$(UNSET)"]
    assert launch.env["HOSTNAME"] == "tj-node-0-1-abcde"
    assert launch.env["PATH"].split(":")[0].endswith("/bin")
    assert launch.workdir == "/"


def test_a_container_without_command_or_args_fails_clearly(tmp_path: Path) -> None:
    pod = _pod([], command=None, args=None)
    with pytest.raises(
        SandboxError, match="no command: images are local Python environments"
    ) as err:
        plan_launch(pod, pod["spec"]["containers"][0], _ctx(tmp_path), {}, "bwrap")
    assert err.value.reason == "CreateContainerError"


def test_args_without_command_run_as_the_command_when_the_image_has_no_entrypoint(
    tmp_path: Path,
) -> None:
    pod = _pod([], command=None, args=["python", "-c", "print(1)"])
    launch = plan_launch(pod, pod["spec"]["containers"][0], _ctx(tmp_path), {}, "bwrap")
    assert launch.command == ["python", "-c", "print(1)"]


def test_an_image_mapping_supplies_entrypoint_path_and_workdir(tmp_path: Path) -> None:
    env = ImageEnv(prefix=tmp_path / "venv", workdir="/workspace", entrypoint=("python", "-u"))
    ctx = make_ctx(tmp_path, images=ImageMap({"pytorch/pytorch:*": env}))
    pod = make_pod(containers=[{"name": "c", "image": "pytorch/pytorch:2.13.0", "args": ["x.py"]}])
    launch = plan_launch(pod, pod["spec"]["containers"][0], ctx, {}, "bwrap")
    assert launch.command == ["python", "-u", "x.py"]
    assert launch.env["PATH"].startswith(f"{tmp_path}/venv/bin:")
    assert launch.workdir == "/workspace"


def test_plain_mode_points_peer_names_and_mount_paths_at_what_exists(tmp_path: Path) -> None:
    from kubetrain.local.sandbox.volumes import Mount

    ctx = make_ctx(tmp_path, hosts={"tj-node-0-0.tj": "127.0.0.2", "tj-node-0-0": "127.0.0.2"})
    pod = _pod(
        [{"name": "PET_MASTER_ADDR", "value": "tj-node-0-0.tj"},
         {"name": "COORD", "value": "tj-node-0-0.tj:29500"},
         {"name": "OTHER", "value": "tj-node-0-0.tjx"}],
        command=["python", "/workspace/train.py", "--out=/workspace/output/m.pt", "/workspacefoo",
                 "cat > /tmp/x.py", "/var/tmp/y"],
        volumeMounts=[{"name": "code", "mountPath": "/workspace"}, {"name": "out", "mountPath": "/workspace/output"}],
    )  # fmt: skip
    volumes = {"code": tmp_path / "code", "out": tmp_path / "out"}
    launch = plan_launch(pod, pod["spec"]["containers"][0], ctx, volumes, "plain")
    assert launch.env["PET_MASTER_ADDR"] == "127.0.0.2"
    assert launch.env["COORD"] == "127.0.0.2:29500"
    assert launch.env["OTHER"] == "tj-node-0-0.tjx"
    assert launch.command[1:] == [
        f"{tmp_path}/code/train.py", f"--out={tmp_path}/out/m.pt", "/workspacefoo",
        f"cat > {ctx.pod_dir}/tmp/node/x.py", "/var/tmp/y",
    ]  # fmt: skip
    assert launch.env["TMPDIR"] == f"{ctx.pod_dir}/tmp/node"
    assert launch.mounts[0] == Mount(tmp_path / "code", "/workspace", False)
    assert any("not mounted" in w for w in launch.warnings)
