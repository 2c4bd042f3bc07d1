"""The executor's own small Kubernetes REST client: plain dicts over lightkube's transport.

The executor meets the controller only through the API server and may not import it, so it
carries this minimal client: get, list, watch, create, merge-patch (also of ``/status``) and
delete, for Pods, Events, ConfigMaps, Secrets and JobSets. lightkube supplies the kubeconfig
handling (token, TLS); the requests are plain JSON.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

import httpx2
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig

__all__ = ["JOBSETS", "PODS", "KubeApi", "KubeApiError", "Resource"]

Obj = dict[str, Any]
# (api version, plural)
Resource = tuple[str, str]
PODS: Resource = ("v1", "pods")
EVENTS: Resource = ("v1", "events")
JOBSETS: Resource = ("jobset.x-k8s.io/v1alpha2", "jobsets")
SERVICES: Resource = ("v1", "services")


class KubeApiError(Exception):
    """A non-2xx answer; ``code`` is the HTTP status (404, 409, 410, ...)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _url(
    res: Resource, namespace: str | None, name: str | None = None, sub: str | None = None
) -> str:
    api_version, plural = res
    parts = ["/api/v1" if api_version == "v1" else f"/apis/{api_version}"]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name is not None:
        parts.append(name)
    if sub:
        parts.append(sub)
    return "/".join(parts)


class KubeApi:
    """Requests against one API server; ``namespace=None`` lists and watches all namespaces."""

    def __init__(self, http: httpx2.AsyncClient) -> None:
        self._http = http

    @classmethod
    def from_kubeconfig(cls, path: str | PathLike[str], context: str | None = None) -> KubeApi:
        single = KubeConfig.from_file(Path(path)).get(context)
        assert single is not None  # get() without a default always answers or raises
        params = client_adapter.ConnectionParams(timeout=httpx2.Timeout(10.0))
        return cls(client_adapter.AsyncClient(single, params))

    async def close(self) -> None:
        await self._http.aclose()

    async def _call(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Obj:
        headers = {"Accept": "application/json"}
        content = None
        if body is not None:
            content = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        resp = await self._http.request(
            method, url, params=dict(params or {}), content=content, headers=headers
        )
        if resp.status_code >= 400:
            raise KubeApiError(resp.status_code, resp.text[:500])
        data = resp.json() if resp.content else {}
        return data if isinstance(data, dict) else {}

    async def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        return await self._call("GET", _url(res, namespace, name))

    async def list(
        self, res: Resource, *, label_selector: str | None = None
    ) -> tuple[list[Obj], str]:
        """Every item in all namespaces and the list's resourceVersion."""
        params = {"labelSelector": label_selector} if label_selector else {}
        page = await self._call("GET", _url(res, None), params=params)
        return list(page.get("items") or []), str(
            (page.get("metadata") or {}).get("resourceVersion") or ""
        )

    async def watch(
        self, res: Resource, resource_version: str, *, label_selector: str | None = None
    ) -> AsyncIterator[tuple[str, Obj]]:
        """``(type, object)`` until the server closes; an ERROR event raises (410: relist)."""
        params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
        if resource_version:
            params["resourceVersion"] = resource_version
        if label_selector:
            params["labelSelector"] = label_selector
        request = self._http.build_request(
            "GET", _url(res, None), params=params, timeout=httpx2.Timeout(10.0, read=None)
        )
        resp = await self._http.send(request, stream=True)
        try:
            if resp.status_code >= 400:
                await resp.aread()
                raise KubeApiError(resp.status_code, resp.text[:500])
            async for line in resp.aiter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = str(event.get("type")), event.get("object") or {}
                if kind == "ERROR":
                    raise KubeApiError(int(obj.get("code") or 500), str(obj.get("message") or ""))
                yield kind, obj
        finally:
            await resp.aclose()

    async def create(self, res: Resource, obj: Obj) -> Obj:
        namespace = (obj.get("metadata") or {}).get("namespace")
        return await self._call("POST", _url(res, namespace), body=obj)

    async def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
    ) -> Obj:
        """A JSON merge patch (the one patch type every server takes for every kind)."""
        return await self._call(
            "PATCH",
            _url(res, namespace, name, subresource),
            body=body,
            content_type="application/merge-patch+json",
        )

    async def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        grace_seconds: int | None = None,
        propagation: str | None = None,
        uid: str | None = None,
    ) -> None:
        options: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        if propagation:
            options["propagationPolicy"] = propagation
        if uid:
            # Never delete a newer object that took the same name.
            options["preconditions"] = {"uid": uid}
        await self._call("DELETE", _url(res, namespace, name), body=options)
