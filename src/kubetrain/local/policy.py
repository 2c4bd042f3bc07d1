"""What the local engine allows beyond Kubernetes' own rules, from ``<KUBETRAIN_HOME>/engine.yaml``.

A pod on the local engine is a process of the user who runs the daemon, so a ``hostPath``
volume is that user's whole filesystem (root's, for a daemon run as root). The engine
therefore refuses every object that would mount one, unless its host path lies under a
directory the engine's owner listed::

    # <KUBETRAIN_HOME>/engine.yaml
    allowedHostPaths: [/data/datasets, /scratch]
    maxNumNodes: 1000        # kubetrain's sanity limit on a TrainJob's numNodes (the default)

The refusal happens at admission (TrainJobs, runtimes, JobSets, Jobs, Pods: anything whose
pod template has volumes) and again before a pod starts, for objects stored before the
setting changed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubetrain.api import codec
from kubetrain.api.errors import FieldError
from kubetrain.local.apiserver.admission import ObjectReader, Operation, PermissiveAdmission
from kubetrain.runtime.config import DEFAULT_MAX_NUM_NODES

__all__ = [
    "ENGINE_CONFIG_FILE",
    "EngineConfig",
    "EngineConfigError",
    "HostPathPolicy",
    "host_path_errors",
    "load_engine_config",
]

ENGINE_CONFIG_FILE = "engine.yaml"
_SETTING = "allowedHostPaths"
_MAX_NODES = "maxNumNodes"


class EngineConfigError(Exception):
    """``engine.yaml`` cannot be read or holds something wrong; the text names the file."""


@dataclass(frozen=True)
class EngineConfig:
    """The engine owner's settings; ``source`` is the file they came from (for messages)."""

    allowed_host_paths: tuple[str, ...] = ()
    source: str = ENGINE_CONFIG_FILE
    max_num_nodes: int = DEFAULT_MAX_NUM_NODES


def load_engine_config(home: Path) -> EngineConfig:
    """The settings in ``<home>/engine.yaml``; the defaults when there is none."""
    path = home / ENGINE_CONFIG_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return EngineConfig(source=str(path))
    except OSError as err:
        raise EngineConfigError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise EngineConfigError(f"{path}: not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(data, Mapping):
        raise EngineConfigError(f"{path}: expected a mapping, got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in (_SETTING, _MAX_NODES))
    if unknown:
        raise EngineConfigError(
            f"{path}: unknown setting {unknown[0]!r} (known: {_SETTING}, {_MAX_NODES})"
        )
    paths = data.get(_SETTING) or []
    if not isinstance(paths, list) or not all(
        isinstance(p, str) and p.startswith("/") for p in paths
    ):
        raise EngineConfigError(f"{path}: {_SETTING} must be a list of absolute paths")
    max_nodes = data.get(_MAX_NODES, DEFAULT_MAX_NUM_NODES)
    # bool is an int in Python; `maxNumNodes: true` is a mistake, not 1.
    if not isinstance(max_nodes, int) or isinstance(max_nodes, bool) or max_nodes < 1:
        raise EngineConfigError(f"{path}: {_MAX_NODES} must be an integer >= 1, got {max_nodes!r}")
    return EngineConfig(tuple(os.path.normpath(p) for p in paths), str(path), max_nodes)


def _allowed(path: str, allowed: tuple[str, ...]) -> bool:
    # Compared as the sandbox will bind it: symlinks resolved, so /allowed/link -> / fails.
    real = os.path.realpath(os.path.normpath(path))
    for root in allowed:
        base = os.path.realpath(root)
        if real == base or real.startswith(base.rstrip("/") + "/"):
            return True
    return False


def _volumes(obj: Any, path: tuple[str | int, ...]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every ``volumes[i]`` entry anywhere in ``obj`` (pod specs nest at many depths).

    The path is kept as a tuple and spelled only for a hit: this walk runs on every admitted
    write, and most objects hold no volumes at all."""
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            if key == "volumes" and isinstance(value, list):
                for i, volume in enumerate(value):
                    if isinstance(volume, Mapping):
                        yield f"{_spell((*path, str(key)))}[{i}]", volume
            elif isinstance(value, Mapping | list):
                yield from _volumes(value, (*path, str(key)))
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            if isinstance(item, Mapping | list):
                yield from _volumes(item, (*path, i))


def _spell(path: tuple[str | int, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def host_path_errors(obj: Mapping[str, Any], config: EngineConfig) -> list[FieldError]:
    """A Forbidden error for each ``hostPath`` volume in ``obj`` outside the allowed paths."""
    errors: list[FieldError] = []
    for where, volume in _volumes(obj.get("spec"), ("spec",)):
        host = volume.get("hostPath")
        if not isinstance(host, Mapping):
            continue
        target = str(host.get("path") or "")
        if target.startswith("/") and _allowed(target, config.allowed_host_paths):
            continue
        errors.append(
            FieldError(
                f"{where}.hostPath.path",
                f"{target!r}: hostPath volumes are not allowed on the local engine (a pod "
                f"would reach the host as the engine's user); list the directory under "
                f"{_SETTING} in {config.source} to allow it",
                "Forbidden",
            )
        )
    return errors


class HostPathPolicy(PermissiveAdmission):
    """Admission for the embedded API server: refuses objects with disallowed hostPath volumes."""

    # Its validate only reads: the chain need not copy every admitted object for it.
    validate_reads_only = True

    def __init__(self, config: EngineConfig) -> None:
        self.config = config

    def validate(
        self,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        reader: ObjectReader,
    ) -> tuple[list[FieldError], list[str]]:
        if operation not in ("CREATE", "UPDATE"):
            return [], []
        spec = obj.get("spec")
        if old is not None and old.get("spec") == spec:
            return [], []  # status and metadata writes: the volumes were checked when set
        if b'"hostPath"' not in codec.dumps(spec):
            # Scanning the encoded spec (C code) costs a fraction of walking it in Python, and
            # most objects have no hostPath anywhere.
            return [], []
        return host_path_errors(obj, self.config), []
