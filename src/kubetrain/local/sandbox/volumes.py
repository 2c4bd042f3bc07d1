"""Volumes made real on the host: one directory (or file) per volume, bound at mountPath.

Every kind resolves to a host path the sandbox binds at the mount's real ``mountPath``:
emptyDir and the data volumes (configMap, secret, projected, downwardAPI) live in the pod's
directory and go with it; a PVC is a directory per claim that outlives the pod; hostPath is
the host path itself.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from kubetrain.api.access import dicts, obj_at

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


# Relative path in a data volume → (content, mode).
Files = dict[PurePosixPath, tuple[bytes, int]]


def _write(files: Files, rel: str, data: bytes, mode: int) -> None:
    files[_safe_rel(rel)] = (data, mode)


def _as_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _project_data(
    files: Files,
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
            _write(files, key, _as_bytes(value), default_mode)
        return
    for item in items:
        key = str(item["key"])
        if key not in data:
            if source.get("optional"):
                continue
            raise SandboxError(f"key {key!r} in {kind} {name!r} not found")
        _write(files, str(item["path"]), _as_bytes(data[key]), int(item.get("mode", default_mode)))


def _project_downward(
    files: Files, pod: Mapping[str, Any], items: Iterable[Mapping[str, Any]],
    ctx: SandboxContext, default_mode: int,
) -> None:  # fmt: skip
    for item in items:
        if "fieldRef" not in item:
            raise SandboxError("downwardAPI items support fieldRef only")
        value = field_ref(pod, str(item["fieldRef"]["fieldPath"]), ctx)
        _write(files, str(item["path"]), value.encode(), int(item.get("mode", default_mode)))


def _token(source: Mapping[str, Any], ctx: SandboxContext) -> bytes:
    audience = str(source.get("audience") or "")
    token = ctx.tokens.get(audience)
    if token is None:
        raise SandboxError(f"no service account token supplied for audience {audience!r}")
    return token.encode()


def _unchanged(path: Path, data: bytes, mode: int) -> bool:
    try:
        st = path.lstat()
        return (
            stat.S_ISREG(st.st_mode)
            and stat.S_IMODE(st.st_mode) == mode
            and (path.read_bytes() == data)
        )
    except OSError:
        return False


def _sync(root: Path, files: Files) -> Path:
    """Make ``root`` hold exactly ``files``, changing it in place.

    Running containers bind this very directory, including ones a restarted daemon adopted,
    so it is never replaced: each file is swapped in by rename (readers see old or new,
    never half), and keys that are gone are removed, as the kubelet's atomic writer does.
    """
    root.mkdir(parents=True, exist_ok=True)
    wanted_dirs = {root}
    for rel, (data, mode) in files.items():
        target = root / rel
        for parent in reversed(target.parents):
            if parent.is_relative_to(root) and parent != root:
                if parent.exists() and not parent.is_dir():
                    parent.unlink()
                wanted_dirs.add(parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        if _unchanged(target, data, mode):
            continue  # keeps the inode, and any owner a framework hook gave the file
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        tmp = target.parent / f".{target.name}.kubetrain-new"
        tmp.unlink(missing_ok=True)  # a leftover with mode 0400 could not be opened again
        tmp.write_bytes(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    wanted = {root / rel for rel in files}
    for path in sorted(root.rglob("*"), key=lambda p: -len(p.parts)):
        if path.is_dir() and not path.is_symlink():
            if path not in wanted_dirs and not any(path.iterdir()):
                path.rmdir()
        elif path not in wanted:
            path.unlink()
    return root


def _prepare_one(
    pod: Mapping[str, Any], volume: Mapping[str, Any], ctx: SandboxContext, base: Path
) -> Path:
    name = str(volume["name"])
    namespace = str(obj_at(pod, "metadata").get("namespace") or "default")
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
    files: Files = {}
    if "configMap" in volume:
        src = volume["configMap"]
        mode = int(src.get("defaultMode", DEFAULT_MODE))
        _project_data(files, "configmap", src, ctx.config_maps, mode)
        return _sync(here, files)
    if "secret" in volume:
        src = dict(volume["secret"])
        src["name"] = src.get("secretName", "")
        mode = int(src.get("defaultMode", DEFAULT_MODE))
        _project_data(files, "secret", src, ctx.secrets, mode)
        return _sync(here, files)
    if "downwardAPI" in volume:
        src = volume["downwardAPI"]
        mode = int(src.get("defaultMode", DEFAULT_MODE))
        _project_downward(files, pod, dicts(src.get("items")), ctx, mode)
        return _sync(here, files)
    if "projected" in volume:
        spec = volume["projected"]
        mode = int(spec.get("defaultMode", DEFAULT_MODE))
        for source in dicts(spec.get("sources")):
            if "configMap" in source:
                _project_data(files, "configmap", source["configMap"], ctx.config_maps, mode)
            elif "secret" in source:
                _project_data(files, "secret", source["secret"], ctx.secrets, mode)
            elif "downwardAPI" in source:
                items = dicts(source["downwardAPI"].get("items"))
                _project_downward(files, pod, items, ctx, mode)
            elif "serviceAccountToken" in source:
                sat = source["serviceAccountToken"]
                _write(files, str(sat.get("path", "token")), _token(sat, ctx), mode)
            else:
                raise SandboxError(f"volume {name}: unsupported projected source {sorted(source)}")
        return _sync(here, files)
    kinds = sorted(k for k in volume if k != "name")
    raise SandboxError(f"volume {name}: unsupported volume type {kinds}")


def prepare_volumes(pod: Mapping[str, Any], ctx: SandboxContext) -> dict[str, Path]:
    """Create or refresh every volume of the pod; volume name → host path."""
    base = ctx.pod_dir / "volumes"
    base.mkdir(parents=True, exist_ok=True)
    volumes = dicts(obj_at(pod, "spec").get("volumes"))
    return {str(v["name"]): _prepare_one(pod, v, ctx, base) for v in volumes}


# Volume kinds the kubelet always mounts read-only, whatever the mount says.
_ALWAYS_RO = ("configMap", "secret", "projected", "downwardAPI")


def container_mounts(
    pod: Mapping[str, Any], container: Mapping[str, Any], volumes: Mapping[str, Path]
) -> list[Mount]:
    """The container's volumeMounts as host path → mountPath binds, in declaration order."""
    kinds = {str(v["name"]): v for v in dicts(obj_at(pod, "spec").get("volumes"))}
    mounts: list[Mount] = []
    for vm in dicts(container.get("volumeMounts")):
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
