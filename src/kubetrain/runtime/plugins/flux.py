"""Flux: run the trainer command inside a Flux instance spanning the ``node`` pods (trainer v2.3.0 pkg/runtime/framework/plugins/flux/flux.go).

Phase 2 wraps the trainer command in ``/etc/flux-config/entrypoint.sh`` (its arguments are the
original command and args joined into one string; args are cleared), adds the ``flux-installer``
init container that stages Flux from the flux-view image, and mounts the shared volumes, the
scripts and the CURVE certificate into the ``node`` container. Phase 6 returns the
``TJ-flux-entrypoint`` ConfigMap (``entrypoint.sh``, ``init.sh``) and the ``TJ-flux-curve``
Secret. The scripts and the certificate come from :mod:`kubetrain.runtime.flux_assets`.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from kubetrain.api.access import as_int, dicts, list_at
from kubetrain.api.errors import FieldError
from kubetrain.runtime.config import Environment
from kubetrain.runtime.flux_assets import (
    FLUX_BROKER_DEFAULTS,
    flux_broker_settings,
    flux_curve_cert,
    flux_entrypoint_script,
    flux_init_script,
)
from kubetrain.runtime.framework import BuildContext, RenderError, ValidationContext, object_meta
from kubetrain.runtime.info import RuntimeInfo
from kubetrain.runtime.podspec import Obj, upsert_volume, upsert_volume_mount
from kubetrain.runtime.resources import gpu_count

__all__ = ["INSTALLER", "Flux", "new"]

NODE = "node"
INSTALLER = "flux-installer"
SPACK_VOLUME, SPACK_PATH = "spack-install", "/opt/software"
INSTALL_VOLUME, INSTALL_PATH = "flux-install", "/mnt/flux"
CONFIG_PATH = "/etc/flux-config"
CURVE_VOLUME, CURVE_PATH = "flux-curve", "/curve"
MEMORY_VOLUME, MEMORY_PATH = "shared-memory", "/dev/shm"


def _entrypoint_name(trainjob: str) -> str:
    return f"{trainjob}-flux-entrypoint"


def _curve_name(trainjob: str) -> str:
    return f"{trainjob}-flux-curve"


def _procs_per_node(info: RuntimeInfo, policy: Obj) -> int:
    trainer = info.trainer
    if trainer is not None and trainer.get("numProcPerNode") is not None:
        return as_int(trainer.get("numProcPerNode"), 1)
    # The CRD defaults fluxPolicy.numProcPerNode to 1.
    return as_int(policy.get("numProcPerNode"), 1)


def _env_list(container: Mapping[str, Any] | None) -> list[Any]:
    return dicts(container.get("env")) if container is not None else []


def _installer(image: str, entrypoint: str) -> Obj:
    """The init container that stages Flux from the flux-view image into ``/mnt/flux``."""
    return {
        "name": INSTALLER,
        "image": image,
        "command": ["/bin/bash", f"{CONFIG_PATH}/init.sh"],
        "volumeMounts": [
            {"name": INSTALL_VOLUME, "mountPath": INSTALL_PATH},
            {"name": entrypoint, "readOnly": True, "mountPath": CONFIG_PATH},
        ],
    }


class Flux:
    """Active with ``mlPolicy.flux``."""

    name = "flux"

    def __init__(self, env: Environment) -> None:
        self._env = env

    def _settings(self, info: RuntimeInfo) -> dict[str, str]:
        # Upstream's default view image is the controller's FLUX_VIEW_IMAGE; here Environment's.
        defaults = dict(FLUX_BROKER_DEFAULTS, FLUX_VIEW_IMAGE=self._env.flux_view_image)
        return flux_broker_settings(
            _env_list(info.trainer_container()), _env_list(info.trainer), defaults
        )

    @staticmethod
    def _nodes(info: RuntimeInfo) -> int:
        # Upstream dereferences spec.trainer.numNodes unguarded (a reconcile panic without it);
        # here the same TrainJob fails its reconcile with a readable reason.
        trainer = info.trainer
        nodes = trainer.get("numNodes") if trainer is not None else None
        if isinstance(nodes, bool) or not isinstance(nodes, int):
            raise RenderError(
                FieldError("spec.trainer.numNodes", "Required value: a Flux TrainJob must set it")
            )
        return nodes

    # --- phase 1 ------------------------------------------------------------------------------

    def validate(self, info: RuntimeInfo, job: Obj, ctx: ValidationContext) -> list[FieldError]:
        policy = info.policy("flux")
        if policy is None:
            return []
        errors: list[FieldError] = []
        procs = policy.get("numProcPerNode")
        trainer = info.trainer
        if trainer is not None and trainer.get("numProcPerNode") is not None:
            procs = trainer.get("numProcPerNode")
        if isinstance(procs, int) and not isinstance(procs, bool) and procs < 1:
            errors.append(
                FieldError(
                    "spec.trainer.numProcPerNode",
                    "must be greater than or equal to 1 for Flux TrainJob",
                )
            )
        for ps in info.pod_sets:
            if ps.name != NODE:
                continue
            for c in list_at(ps.pod_spec, "initContainers"):
                if isinstance(c, dict) and c.get("name") == INSTALLER:
                    errors.append(
                        FieldError(
                            "spec.trainer.initContainers",
                            "InitContainer 'flux-installer' is reserved",
                        )
                    )
        return errors

    # --- phase 2 ------------------------------------------------------------------------------

    def enforce_ml_policy(self, info: RuntimeInfo, job: Obj) -> None:
        policy = info.policy("flux")
        if policy is None:
            return
        trainer = info.trainer
        if trainer is None:
            raise RenderError(
                FieldError("spec.trainer", "Required value: a Flux TrainJob must set it")
            )
        self._nodes(info)
        settings = self._settings(info)
        name = info.trainjob_name
        entrypoint = _entrypoint_name(name)

        # The command Flux runs: the runtime's, or the TrainJob's, plus the TrainJob's args.
        runtime_node = info.trainer_container()
        command = runtime_node.get("command") if runtime_node is not None else None
        args: Any = None
        if trainer.get("command") is not None:
            command = trainer.get("command")
        if trainer.get("args") is not None:
            args = trainer.get("args")
        words = [str(w) for w in [*(command or []), *(args or [])]]
        trainer["command"] = ["/bin/bash", f"{CONFIG_PATH}/entrypoint.sh", " ".join(words).strip()]
        trainer.pop("args", None)

        for ps in info.pod_sets:
            if ps.name != NODE:
                continue
            upsert_volume(
                ps.pod_spec,
                {"name": SPACK_VOLUME, "emptyDir": {}},
                {"name": INSTALL_VOLUME, "emptyDir": {}},
                {"name": entrypoint, "configMap": {"name": entrypoint, "defaultMode": 0o755}},
                {"name": MEMORY_VOLUME, "emptyDir": {"medium": "Memory"}},
                {
                    "name": CURVE_VOLUME,
                    "secret": {"secretName": _curve_name(name), "defaultMode": 0o400},
                },
            )
            # Appended, not upserted: validation reserves the name in the runtime.
            ps.init_containers.append(_installer(settings["FLUX_VIEW_IMAGE"], entrypoint))
            for container in ps.containers:
                if isinstance(container, dict) and container.get("name") == NODE:
                    upsert_volume_mount(
                        container,
                        {"name": INSTALL_VOLUME, "mountPath": INSTALL_PATH},
                        {"name": SPACK_VOLUME, "mountPath": SPACK_PATH},
                        {"name": entrypoint, "readOnly": True, "mountPath": CONFIG_PATH},
                        {"name": CURVE_VOLUME, "readOnly": True, "mountPath": CURVE_PATH},
                        {"name": MEMORY_VOLUME, "readOnly": True, "mountPath": MEMORY_PATH},
                    )

    # --- phase 6 ------------------------------------------------------------------------------

    def build(self, info: RuntimeInfo, job: Obj, ctx: BuildContext) -> list[Obj]:
        policy = info.policy("flux")
        if policy is None:
            return []
        name = info.trainjob_name
        nodes = self._nodes(info)
        settings = self._settings(info)
        entrypoint = flux_entrypoint_script(
            trainjob_name=name,
            nodes=nodes,
            procs_per_node=_procs_per_node(info, policy),
            gpus=gpu_count(info.trainer_resources()),
        )
        init = flux_init_script(
            trainjob_name=name, namespace=info.trainjob_namespace, nodes=nodes, settings=settings
        )
        cert = flux_curve_cert(name, info.trainjob_uid)
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": object_meta(info, _entrypoint_name(name)),
                "data": {"entrypoint.sh": entrypoint, "init.sh": init},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": object_meta(info, _curve_name(name)),
                "data": {"curve.cert": base64.b64encode(cert.encode()).decode("ascii")},
            },
        ]


def new(gates: object, env: Environment) -> Flux:
    """Always registered; inert unless the runtime has ``mlPolicy.flux``."""
    return Flux(env)
