"""A small dict-level Kubernetes REST client for the controller.

Built on lightkube's kubeconfig handling and its httpx2 transport (auth, TLS, in-cluster config),
but speaking plain dicts and explicit paths: the controller applies the Plan's objects as they are,
of any kind, and must never fall into lightkube's defaults that break on custom resources
(strategic-merge patches answer 415) or its error mapping that needs an exact
``application/json`` content type. Every patch here names its content type.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Literal

import httpx2
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig, SingleConfig

from kubetrain.api.types import Obj

__all__ = [
    "TRANSPORT_ERRORS",
    "ApiError",
    "KubeClient",
    "KubeConfigLike",
    "PatchType",
    "connect",
    "load_config",
]

# A kubeconfig file, an already-parsed kubeconfig document, lightkube's config objects, or None
# for the environment (in-cluster service account, $KUBECONFIG, ~/.kube/config).
KubeConfigLike = KubeConfig | SingleConfig | Mapping[str, Any] | str | PathLike[str] | None

# What a request raises when the server cannot be reached or the connection breaks.
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (httpx2.HTTPError, OSError)

PatchType = Literal["merge", "json", "apply"]
_CONTENT_TYPES: dict[PatchType, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    # JSON is YAML, so an apply body can be sent as JSON under the YAML apply type.
    "apply": "application/apply-patch+yaml",
}


class ApiError(Exception):
    """An answer from the API server other than 2xx, carrying its ``Status`` fields."""

    def __init__(self, code: int, reason: str, message: str, status: Obj | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.status = status or {}

    @property
    def not_found(self) -> bool:
        return self.code == 404

    @property
    def conflict(self) -> bool:
        return self.code == 409

    @property
    def gone(self) -> bool:
        """410: a watch's resourceVersion is too old; the caller must list again."""
        return self.code == 410

    @classmethod
    def from_status(cls, status: Obj, code: int | None = None) -> ApiError:
        return cls(
            int(status.get("code") or code or 500),
            str(status.get("reason") or "Unknown"),
            str(status.get("message") or ""),
            status,
        )

    @classmethod
    def from_response(cls, resp: httpx2.Response) -> ApiError:
        # Decode any Status body whatever its content type says (some servers add a charset).
        try:
            body = json.loads(resp.content)
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("kind") == "Status":
            return cls.from_status(body, resp.status_code)
        return cls(resp.status_code, resp.reason_phrase or "Unknown", resp.text[:500])


def load_config(config: KubeConfigLike, context: str | None = None) -> SingleConfig:
    """The context ``context`` (default: current) of ``config`` (see ``KubeConfigLike``)."""
    if isinstance(config, SingleConfig):
        return config
    if config is None:
        config = KubeConfig.from_env()
    elif isinstance(config, str | PathLike):
        config = KubeConfig.from_file(Path(config))
    elif isinstance(config, Mapping):
        config = KubeConfig.from_dict(dict(config))
    single = config.get(context)
    if single is None:  # only possible with a default, which we never pass
        raise ValueError("kubeconfig has no usable context")
    return single


def connect(
    config: KubeConfigLike = None, *, context: str | None = None, timeout: float = 10.0
) -> KubeClient:
    """A client for the cluster named by ``config`` (see ``load_config``)."""
    single = load_config(config, context)
    params = client_adapter.ConnectionParams(timeout=httpx2.Timeout(timeout))
    http = client_adapter.AsyncClient(single, params)
    return KubeClient(http, default_namespace=single.namespace)


@dataclass(frozen=True, slots=True)
class _Path:
    api_version: str
    plural: str
    namespace: str | None
    name: str | None = None
    subresource: str | None = None

    def url(self) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        parts = [base]
        if self.namespace:
            parts.append(f"namespaces/{self.namespace}")
        parts.append(self.plural)
        if self.name is not None:
            parts.append(self.name)
        if self.subresource:
            parts.append(self.subresource)
        return "/".join(parts)


class KubeClient:
    """Get, list, watch, create, patch (merge / JSON / server-side apply) and delete plain dicts.

    Resources are addressed by ``(api_version, plural)``; ``namespace=None`` means cluster-scoped
    (or all namespaces for list and watch).
    """

    def __init__(self, http: httpx2.AsyncClient, *, default_namespace: str = "default") -> None:
        self._http = http
        self.default_namespace = default_namespace
        self._connect_timeout = http.timeout.connect

    async def close(self) -> None:
        await self._http.aclose()

    async def _request(
        self,
        method: str,
        path: _Path,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Obj:
        content = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if content is not None:
            headers["Content-Type"] = content_type
        resp = await self._http.request(
            method, path.url(), params=dict(params or {}), content=content, headers=headers
        )
        if resp.status_code >= 400:
            raise ApiError.from_response(resp)
        if not resp.content:
            return {}
        data = resp.json()
        return data if isinstance(data, dict) else {}

    async def get(
        self, api_version: str, plural: str, name: str, *, namespace: str | None = None
    ) -> Obj:
        return await self._request("GET", _Path(api_version, plural, namespace, name))

    async def list(
        self,
        api_version: str,
        plural: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        chunk_size: int = 500,
    ) -> tuple[list[Obj], str]:
        """Every item (following ``continue`` tokens) and the list's resourceVersion."""
        items: list[Obj] = []
        params: dict[str, str] = {"limit": str(chunk_size)}
        if label_selector:
            params["labelSelector"] = label_selector
        while True:
            page = await self._request("GET", _Path(api_version, plural, namespace), params=params)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                return items, str(meta.get("resourceVersion") or "")
            params["continue"] = cont

    async def watch(
        self,
        api_version: str,
        plural: str,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[tuple[str, Obj]]:
        """``(type, object)`` pairs until the server ends the stream.

        BOOKMARK events are passed on (their object carries only the resourceVersion); an ERROR
        event raises ``ApiError`` (410 when the resourceVersion has expired).
        """
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if resource_version:
            params["resourceVersion"] = resource_version
        if label_selector:
            params["labelSelector"] = label_selector
        path = _Path(api_version, plural, namespace)
        # The server ends the watch after timeoutSeconds; silence well past that means a dead
        # connection (no FIN ever came), so reading gives up and the informer watches again.
        timeout = httpx2.Timeout(self._connect_timeout, read=timeout_seconds + 30.0)
        request = self._http.build_request("GET", path.url(), params=params, timeout=timeout)
        resp = await self._http.send(request, stream=True)
        try:
            if resp.status_code >= 400:
                await resp.aread()
                raise ApiError.from_response(resp)
            async for line in resp.aiter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = str(event.get("type")), event.get("object") or {}
                if kind == "ERROR":
                    raise ApiError.from_status(obj)
                yield kind, obj
        finally:
            await resp.aclose()

    async def create(self, api_version: str, plural: str, obj: Obj) -> Obj:
        namespace = (obj.get("metadata") or {}).get("namespace")
        return await self._request("POST", _Path(api_version, plural, namespace), body=obj)

    async def replace(self, api_version: str, plural: str, obj: Obj) -> Obj:
        """PUT: an update that fails with 409 unless ``metadata.resourceVersion`` is current."""
        meta = obj.get("metadata") or {}
        path = _Path(api_version, plural, meta.get("namespace"), str(meta["name"]))
        return await self._request("PUT", path, body=obj)

    async def patch(
        self,
        api_version: str,
        plural: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
    ) -> Obj:
        params: dict[str, str] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if force:
            params["force"] = "true"
        return await self._request(
            "PATCH",
            _Path(api_version, plural, namespace, name, subresource),
            params=params,
            body=body,
            content_type=_CONTENT_TYPES[patch_type],
        )

    async def apply(
        self,
        plural: str,
        obj: Obj,
        *,
        field_manager: str,
        force: bool = True,
        subresource: str | None = None,
    ) -> Obj:
        """Server-side apply ``obj`` (which names its own apiVersion, kind, name and namespace)."""
        meta = obj.get("metadata") or {}
        return await self.patch(
            str(obj["apiVersion"]),
            plural,
            str(meta["name"]),
            obj,
            namespace=meta.get("namespace"),
            patch_type="apply",
            subresource=subresource,
            field_manager=field_manager,
            force=force,
        )

    async def delete(
        self,
        api_version: str,
        plural: str,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        uid: str | None = None,
    ) -> None:
        """Delete ``name``; with ``uid``, only that incarnation of it (a precondition)."""
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        if uid:
            body["preconditions"] = {"uid": uid}
        await self._request("DELETE", _Path(api_version, plural, namespace, name), body=body)
