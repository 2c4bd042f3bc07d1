"""Volumes made real on the host: one directory (or file) per volume, bound at mountPath.

Every kind resolves to a host path the sandbox binds at the mount's real ``mountPath``:
emptyDir and the data volumes (configMap, secret, projected, downwardAPI) live in the pod's
directory and go with it; a PVC is a directory per claim that outlives the pod; hostPath is
the host path itself.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from .context import SandboxContext
from .envvars import field_ref
from .errors import SandboxError

__all__ = ["Mount", "container_mounts", "prepare_volumes"]

DEFAULT_MODE = 0o644


@dataclass(frozen=True)
class Mount:
    """A host path bound at ``target`` inside the sandbox."""

    source: Path
    target: str
    read_only: bool


def _safe_rel(path: str) -> PurePosixPath:
    rel = PurePosixPath(path)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise SandboxError(f"volume item path {path!r} must be relative and stay inside the volume")
    return rel


def _write(root: Path, rel: str, data: bytes, mode: int) -> None:
    target = root / _safe_rel(rel)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write before chmod: a mode like 0400 would otherwise lock out the next rewrite.
    if target.exists():
        target.unlink()
    target.write_bytes(data)
    os.chmod(target, mode)


def _as_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _project_data(
    root: Path,
    kind: str,
    source: Mapping[str, Any],
    store: Mapping[str, Mapping[str, bytes | str]],
    default_mode: int,
) -> None:
    name = str(source.get("name", ""))
    data = store.get(name)
    if data is None:
        if source.get("optional"):
            return
        raise SandboxError(f"{kind} {name!r} not found")
    items = source.get("items")
    if items is None:
        for key, value in data.items():
            _write(root, key, _as_bytes(value), default_mode)
        return
    for item in items:
        key = str(item["key"])
        if key not in data:
            if source.get("optional"):
                continue
            raise SandboxError(f"key {key!r} in {kind} {name!r} not found")
        _write(root, str(item["path"]), _as_bytes(data[key]), int(item.get("mode", default_mode)))


def _project_downward(
    root: Path, pod: Mapping[str, Any], items: Iterable[Mapping[str, Any]],
    ctx: SandboxContext, default_mode: int,
) -> None:  # fmt: skip
    for item in items:
        if "fieldRef" not in item:
            raise SandboxError("downwardAPI items support fieldRef only")
        value = field_ref(pod, str(item["fieldRef"]["fieldPath"]), ctx)
        _write(root, str(item["path"]), value.encode(), int(item.get("mode", default_mode)))


def _token(source: Mapping[str, Any], ctx: SandboxContext) -> bytes:
    audience = str(source.get("audience") or "")
    token = ctx.tokens.get(audience)
    if token is None:
        raise SandboxError(f"no service account token supplied for audience {audience!r}")
    return token.encode()


def _fresh(path: Path) -> Path:
    # Data volumes are rewritten whole each time the pod is prepared, like the kubelet's
    # atomic writer: keys removed from a ConfigMap must not linger.
    if path.exists():
        for p in [path, *path.rglob("*")]:
            if p.is_dir():
                os.chmod(p, 0o755)
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def _prepare_one(
    pod: Mapping[str, Any], volume: Mapping[str, Any], ctx: SandboxContext, base: Path
) -> Path:
    name = str(volume["name"])
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    here = base / name
    if "emptyDir" in volume:
        here.mkdir(parents=True, exist_ok=True)
        os.chmod(here, 0o777)  # as the kubelet makes it: any container user may write
        return here
    if "hostPath" in volume:
        spec = volume["hostPath"]
        path = Path(str(spec["path"]))
        kind = str(spec.get("type") or "")
        if kind in ("", "DirectoryOrCreate") and not path.exists():
            path.mkdir(parents=True, exist_ok=True)
        elif kind == "FileOrCreate" and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        elif kind == "Directory" and not path.is_dir():
            raise SandboxError(f"hostPath {path} is not a directory")
        elif kind == "File" and not path.is_file():
            raise SandboxError(f"hostPath {path} is not a file")
        return path
    if "persistentVolumeClaim" in volume:
        claim = str(volume["persistentVolumeClaim"]["claimName"])
        path = ctx.claim_path(namespace, claim)
        path.mkdir(parents=True, exist_ok=True)
        return path
    if "configMap" in volume:
        src = volume["configMap"]
        mode = int(src.get("defaultMode", DEFAULT_MODE))
        _project_data(_fresh(here), "configmap", src, ctx.config_maps, mode)
        return here
    if "secret" in volume:
        src = dict(volume["secret"])
        src["name"] = src.get("secretName", "")
        mode = int(src.get("defaultMode", DEFAULT_MODE))
        _project_data(_fresh(here), "secret", src, ctx.secrets, mode)
        return here
    if "downwardAPI" in volume:
        src = volume["downwardAPI"]
        mode = int(src.get("defaultMode", DEFAULT_MODE))
        _project_downward(_fresh(here), pod, src.get("items") or [], ctx, mode)
        return here
    if "projected" in volume:
        spec = volume["projected"]
        mode = int(spec.get("defaultMode", DEFAULT_MODE))
        root = _fresh(here)
        for source in spec.get("sources") or []:
            if "configMap" in source:
                _project_data(root, "configmap", source["configMap"], ctx.config_maps, mode)
            elif "secret" in source:
                _project_data(root, "secret", source["secret"], ctx.secrets, mode)
            elif "downwardAPI" in source:
                _project_downward(root, pod, source["downwardAPI"].get("items") or [], ctx, mode)
            elif "serviceAccountToken" in source:
                sat = source["serviceAccountToken"]
                _write(root, str(sat.get("path", "token")), _token(sat, ctx), mode)
            else:
                raise SandboxError(f"volume {name}: unsupported projected source {sorted(source)}")
        return here
    kinds = sorted(k for k in volume if k != "name")
    raise SandboxError(f"volume {name}: unsupported volume type {kinds}")


def prepare_volumes(pod: Mapping[str, Any], ctx: SandboxContext) -> dict[str, Path]:
    """Create or refresh every volume of the pod; volume name → host path."""
    base = ctx.pod_dir / "volumes"
    base.mkdir(parents=True, exist_ok=True)
    spec = pod.get("spec") or {}
    return {str(v["name"]): _prepare_one(pod, v, ctx, base) for v in spec.get("volumes") or []}


# Volume kinds the kubelet always mounts read-only, whatever the mount says.
_ALWAYS_RO = ("configMap", "secret", "projected", "downwardAPI")


def container_mounts(
    pod: Mapping[str, Any], container: Mapping[str, Any], volumes: Mapping[str, Path]
) -> list[Mount]:
    """The container's volumeMounts as host path → mountPath binds, in declaration order."""
    spec = pod.get("spec") or {}
    kinds = {str(v["name"]): v for v in spec.get("volumes") or []}
    mounts: list[Mount] = []
    for vm in container.get("volumeMounts") or []:
        name = str(vm["name"])
        if name not in volumes:
            raise SandboxError(f"volumeMount {name!r} refers to no volume of the pod")
        source = volumes[name]
        sub = str(vm.get("subPath") or "")
        if sub:
            source = source / _safe_rel(sub)
            if not source.exists():
                source.mkdir(parents=True)
        target = str(vm["mountPath"])
        if not target.startswith("/"):
            raise SandboxError(f"mountPath {target!r} must be absolute")
        ro = bool(vm.get("readOnly")) or any(k in kinds.get(name, {}) for k in _ALWAYS_RO)
        mounts.append(Mount(source=source, target=target, read_only=ro))
    return mounts
