"""MPI: launcher/node counts, slots, the SSH Secret and hostfile ConfigMap, their volumes and the
OpenMPI environment (trainer v2.3.0 pkg/runtime/framework/plugins/mpi/mpi.go); also used by the DeepSpeed and MLX runtimes (trainer v2.3.0 manifests/base/runtimes/deepspeed_distributed.yaml).

Phase 2 edits the ``node`` and ``launcher`` pod specs:

- counts: with ``spec.trainer.numNodes`` the ``node`` PodSet gets ``numNodes - 1`` (at least 1)
  when the launcher is also a rank (``runLauncherAsNode``), else ``numNodes``; the launcher keeps
  the runtime's count;
- slots: ``spec.trainer.numProcPerNode``, else the GPU count when the policy says 1 and a node has
  more than one GPU, else the policy's value;
- both pods mount the key pair at ``sshAuthMountPath``; the launcher also mounts the hostfile at
  ``/etc/mpi`` and gets ``OMPI_MCA_*`` pointing OpenMPI at it.

Phase 6 returns the SSH Secret (only when it does not exist yet: it is immutable, and a new key
would lock running pods out) and the hostfile ConfigMap (always, so it follows resizes).
"""

from __future__ import annotations

import base64

from kubetrain.api.access import as_int, obj_at
from kubetrain.api.errors import FieldError
from kubetrain.runtime.config import Environment
from kubetrain.runtime.framework import (
    BuildContext,
    ObjectRef,
    RenderError,
    ValidationContext,
    object_meta,
    reserved_env_error,
)
from kubetrain.runtime.info import RuntimeInfo
from kubetrain.runtime.podspec import Obj, upsert_env, upsert_volume, upsert_volume_mount
from kubetrain.runtime.resources import gpu_count

__all__ = ["MPI", "RESERVED_ENV", "hostfile", "new"]

LAUNCHER = "launcher"
NODE = "node"
SSH_VOLUME = "mpi-ssh-auth"
HOSTFILE_VOLUME = "mpi-hostfile"
HOSTFILE_DIR = "/etc/mpi"
HOSTFILE_NAME = "hostfile"
DEFAULT_SSH_MOUNT_PATH = "/root/.ssh"
OPENMPI = "OpenMPI"

# OpenMPI's MCA parameters the plugin owns (v2.3 rejects them in spec.trainer.env).
ENV_HOSTFILE = "OMPI_MCA_orte_default_hostfile"
ENV_RSH_ARGS = "OMPI_MCA_plm_rsh_args"
ENV_KEEP_FQDN = "OMPI_MCA_orte_keep_fqdn_hostnames"
ENV_DEFAULT_SLOTS = "OMPI_MCA_orte_set_default_slots"
RESERVED_ENV = frozenset({ENV_HOSTFILE, ENV_RSH_ARGS, ENV_KEEP_FQDN, ENV_DEFAULT_SLOTS})
RSH_ARGS = "-o ConnectionAttempts=10"


def _ssh_secret_name(trainjob: str) -> str:
    return f"{trainjob}-mpi-ssh-auth"


def _hostfile_name(trainjob: str) -> str:
    return f"{trainjob}-mpi-hostfile"


def _launcher_as_node(policy: Obj) -> bool:
    return policy.get("runLauncherAsNode") is True


def _slots(info: RuntimeInfo, policy: Obj) -> int:
    trainer = info.trainer
    if trainer is not None and trainer.get("numProcPerNode") is not None:
        return as_int(trainer.get("numProcPerNode"), 1)
    # The CRD defaults numProcPerNode to 1; a runtime loaded without defaults reads the same.
    slots = as_int(policy.get("numProcPerNode"), 1)
    if slots == 1:
        gpus = gpu_count(info.trainer_resources())
        if gpus > 1:
            slots = gpus
    return slots


def hostfile(info: RuntimeInfo, slots: int, launcher_as_node: bool) -> str:
    """OpenMPI hostfile: ``<endpoint> slots=<n>`` for every pod of the ``node`` PodSet, and of the
    launcher when it is a rank too, in replicatedJob order."""
    lines: list[str] = []
    for ps in info.pod_sets:
        if ps.name == NODE or (launcher_as_node and ps.name == LAUNCHER):
            lines.extend(f"{endpoint} slots={slots}\n" for endpoint in ps.endpoints)
    return "".join(lines)


class MPI:
    """Active with ``mlPolicy.mpi``."""

    name = "mpi"

    def __init__(self, env: Environment) -> None:
        self._env = env

    # --- phase 1 ------------------------------------------------------------------------------

    def validate(self, info: RuntimeInfo, job: Obj, ctx: ValidationContext) -> list[FieldError]:
        policy = info.policy("mpi")
        if policy is None:
            return []
        errors: list[FieldError] = []
        trainer = info.trainer
        if (
            trainer is not None
            and as_int(trainer.get("numNodes"), 1) >= 2
            and _launcher_as_node(policy)
            and (info.pod_set(LAUNCHER) is None or info.pod_set(NODE) is None)
        ):
            errors.append(
                FieldError(
                    "spec.trainer.numNodes",
                    "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not"
                    " have either launcher and node",
                )
            )
        reserved_error = reserved_env_error(trainer, RESERVED_ENV)
        if reserved_error is not None:
            errors.append(reserved_error)
        return errors

    # --- phase 2 ------------------------------------------------------------------------------

    def enforce_ml_policy(self, info: RuntimeInfo, job: Obj) -> None:
        policy = info.policy("mpi")
        if policy is None:
            return
        trainer = info.trainer
        launcher_as_node = _launcher_as_node(policy)
        node = info.pod_set(NODE)
        if node is not None and trainer is not None and trainer.get("numNodes") is not None:
            nodes = as_int(trainer.get("numNodes"), node.count)
            node.count = max(nodes - 1, 1) if launcher_as_node else nodes

        slots = _slots(info, policy)
        info.extra[self.name] = {"slots": slots}
        implementation = policy.get("mpiImplementation", OPENMPI)
        mount_path = policy.get("sshAuthMountPath", DEFAULT_SSH_MOUNT_PATH)
        name = info.trainjob_name
        for ps in info.pod_sets:
            if ps.name not in (NODE, LAUNCHER):
                continue
            upsert_volume(
                ps.pod_spec,
                {
                    "name": SSH_VOLUME,
                    "secret": {
                        "secretName": _ssh_secret_name(name),
                        "items": [
                            {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
                            {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
                            {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644},
                        ],
                        "defaultMode": 0o400,
                    },
                },
            )
            if ps.name == LAUNCHER:
                upsert_volume(
                    ps.pod_spec,
                    {
                        "name": HOSTFILE_VOLUME,
                        "configMap": {
                            "name": _hostfile_name(name),
                            "items": [{"key": HOSTFILE_NAME, "path": HOSTFILE_NAME, "mode": 0o444}],
                        },
                    },
                )
            for container in ps.containers:
                if not isinstance(container, dict) or container.get("name") != NODE:
                    continue
                upsert_volume_mount(container, {"name": SSH_VOLUME, "mountPath": mount_path})
                if ps.name != LAUNCHER:
                    continue
                upsert_volume_mount(container, {"name": HOSTFILE_VOLUME, "mountPath": HOSTFILE_DIR})
                if implementation != OPENMPI:
                    # Upstream's reconcile fails the same way for any other implementation.
                    raise RenderError(
                        FieldError("", f"MPI implementation for {implementation} doesn't supported")
                    )
                upsert_env(
                    container,
                    {"name": ENV_HOSTFILE, "value": f"{HOSTFILE_DIR}/{HOSTFILE_NAME}"},
                    {"name": ENV_KEEP_FQDN, "value": "true"},
                    {"name": ENV_DEFAULT_SLOTS, "value": str(slots)},
                    {"name": ENV_RSH_ARGS, "value": RSH_ARGS},
                )

    # --- phase 6 ------------------------------------------------------------------------------

    def existing_refs(self, trainjob_name: str, runtime_spec: Obj) -> list[ObjectRef]:
        # The SSH key pair is made once and kept: build reuses the stored Secret.
        if not isinstance(obj_at(runtime_spec, "mlPolicy").get("mpi"), dict):
            return []
        return [ObjectRef("v1", "Secret", _ssh_secret_name(trainjob_name))]

    def build(self, info: RuntimeInfo, job: Obj, ctx: BuildContext) -> list[Obj]:
        policy = info.policy("mpi")
        if policy is None:
            return []
        name = info.trainjob_name
        objects: list[Obj] = []
        if ctx.existing.get("Secret", _ssh_secret_name(name)) is None:
            private_pem, public_line = ctx.env.ssh_keypair()
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": object_meta(info, _ssh_secret_name(name)),
                    "immutable": True,
                    "data": {
                        "ssh-privatekey": _b64(private_pem),
                        "ssh-publickey": _b64(public_line),
                    },
                    "type": "kubernetes.io/ssh-auth",
                }
            )
        slots = info.extra.get(self.name, {}).get("slots")
        if not isinstance(slots, int):
            slots = _slots(info, policy)
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": object_meta(info, _hostfile_name(name)),
                "data": {HOSTFILE_NAME: hostfile(info, slots, _launcher_as_node(policy))},
            }
        )
        return objects


def _b64(text: str) -> str:
    # Secret.data carries base64 on the wire, as Go's []byte fields marshal.
    return base64.b64encode(text.encode()).decode("ascii")


def new(gates: object, env: Environment) -> MPI:
    """Always registered; inert unless the runtime has ``mlPolicy.mpi``."""
    return MPI(env)
