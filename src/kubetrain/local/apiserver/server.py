"""``ApiServer``: storage, engine and HTTP put together, started and stopped as one.

In-process use (tests, the daemon)::

    server = ApiServer(home, crds=crd_manifests(), admission=my_admission, seed_objects=runtimes)
    await server.start()          # port 0 picks a free port; server.url tells which
    ...                           # server.kubeconfig() / server.write_kubeconfig(path)
    await server.close()          # ends open watches and log follows first, then stops
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from kubetrain.api.access import obj_at
from kubetrain.kube.kinds import CUSTOM_RESOURCE_DEFINITION
from kubetrain.local.apiserver.admission import Admission, ObjectReader, TrainJobDefaulter
from kubetrain.local.apiserver.audit import AuditLog
from kubetrain.local.apiserver.authz import PolicyCache, review_routes
from kubetrain.local.apiserver.engine import Engine, WriteOptions
from kubetrain.local.apiserver.front import Front
from kubetrain.local.apiserver.http import HttpApi, Route
from kubetrain.local.apiserver.rbac import User, bootstrap_policy, escalation
from kubetrain.local.apiserver.resources import Registry, ResourceDef
from kubetrain.local.apiserver.schema import SchemaRules
from kubetrain.local.apiserver.store import Change, Store
from kubetrain.local.apiserver.streaming import PodStreamer
from kubetrain.local.apiserver.tls import ensure_serving_cert
from kubetrain.local.apiserver.webhooks import WebhookDispatcher

__all__ = [
    "CONTEXT",
    "DEFAULT_NAMESPACES",
    "ApiServer",
    "default_home",
    "kubeconfig_dict",
]

CONTEXT = "kubetrain-local"
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kubeflow-system")

SeedObjects = Iterable[Mapping[str, Any]] | Callable[[], Iterable[Mapping[str, Any]]]


def default_home() -> Path:
    """``$KUBETRAIN_HOME``, else ``~/.kubetrain``."""
    return Path(os.environ.get("KUBETRAIN_HOME") or Path.home() / ".kubetrain")


def kubeconfig_dict(
    url: str,
    token: str | None,
    ca_pem: bytes | None = None,
    context: str = CONTEXT,
    namespace: str = "default",
) -> dict[str, Any]:
    """A kubeconfig whose current context points at ``url`` with ``token`` (and the CA, for https)."""
    user: dict[str, Any] = {"token": token} if token else {}
    cluster: dict[str, Any] = {"server": url}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": user}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": namespace},
            }
        ],
        "current-context": context,
        "preferences": {},
    }


def _abort_lingering(transports: Iterable[asyncio.BaseTransport]) -> None:
    """Abort the server's connections (taken before the runner's cleanup) still open after it.

    A TLS connection closed by the server waits for the client's close_notify (up to 30 s);
    idle pooled clients never send it, and the loop would end with the socket open. Aborting
    a connection that did close does nothing.
    """
    for transport in transports:
        transport.abort()  # type: ignore[attr-defined]


_CRDS_KEY = ResourceDef.of(CUSTOM_RESOURCE_DEFINITION).key


class ApiServer:
    """The embedded Kubernetes API server for one ``KUBETRAIN_HOME``.

    ``home``: where ``apiserver.db``, the token file and ``logs/`` live (``None``: the default
    home). ``in_memory``: keep nothing on disk (tests). ``crds``: CRD manifests whose schemas,
    printer columns and names replace the built-in stand-ins. ``admission``: the in-process
    webhooks (default: Trainer's TrainJob defaulter, admitting everything). ``seed_objects``:
    created at start when absent (the default runtimes). ``token``: the bearer token clients
    must send (default: kept in ``<home>/apiserver.token``); ``auth=False`` turns checking off.
    ``routes``: extra (method, path, handler) endpoints, e.g. TokenRequest/TokenReview, served
    before the Kubernetes paths and behind the same auth. ``authenticator``: maps further
    bearer tokens (e.g. service-account tokens) to a `rbac.User`, None when not accepted.
    ``rbac``: authorise every request against the stored Roles and bindings (the bootstrap
    ClusterRoles are created at start); ``token`` holders are system:masters.
    ``history``: how many changes watches can resume from (older resourceVersions get 410 and
    clients relist); it bounds the memory old object versions take.
    ``tls``: serve https with a CA and certificate kept in ``<home>/pki`` (kubectl sends tokens
    only over https); ``tls=False`` serves plain http.
    ``audit_log``: append what RBAC decides there (`audit.AuditLog`, kube-apiserver's
    ``--audit-log-path``).
    """

    def __init__(
        self,
        home: Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        crds: Iterable[Mapping[str, Any]] = (),
        resources: Iterable[ResourceDef] = (),
        admission: Admission | None = None,
        schema_rules: SchemaRules | None = None,
        seed_objects: SeedObjects = (),
        token: str | None = None,
        auth: bool = True,
        tls: bool = True,
        in_memory: bool = False,
        logs_dir: Path | None = None,
        bookmark_interval: float = 60.0,
        history: int = 10_000,
        routes: Iterable[Route] = (),
        authenticator: Callable[[str], User | None] | None = None,
        rbac: bool = True,
        audit_log: Path | None = None,
    ) -> None:
        self.home = Path(home) if home is not None else default_home()
        self.host = host
        self.port = port
        self._seed = seed_objects
        self.registry = Registry.build(crds, resources)
        self.store = Store(None if in_memory else self.home / "apiserver.db", history=history)
        # RBAC guards every request but the admin's (system:masters), as on a cluster.
        self.audit = AuditLog(audit_log) if audit_log is not None and rbac and auth else None
        self.policy = PolicyCache(self.store, self.audit) if rbac and auth else None
        # Webhooks from the stored Validating/MutatingWebhookConfigurations, as on a cluster.
        self.webhooks = WebhookDispatcher(self.store)
        self.engine = Engine(
            self.registry,
            self.store,
            admission=admission or TrainJobDefaulter(),
            schema_rules=schema_rules,
            webhooks=self.webhooks,
            escalation=self._escalation if self.policy is not None else None,
        )
        self.token = token if token is not None or not auth else self._stored_token()
        self.http = HttpApi(
            self.engine,
            logs_dir or self.home / "logs",
            frozenset({self.token}) if auth and self.token else None,
            bookmark_interval,
            routes=[*routes, *(review_routes(self.policy) if self.policy else ())],
            authenticator=authenticator,
            authorizer=self.policy,
        )
        self._runner: web.AppRunner | None = None
        self._front: Front | None = None
        self._cert = ensure_serving_cert(self.home / "pki") if tls else None

    def _escalation(self, obj: dict[str, Any], user: Any) -> str | None:
        assert self.policy is not None
        return escalation(user, obj, self.policy.policy()) if isinstance(user, User) else None

    def _stored_token(self) -> str:
        path = self.home / "apiserver.token"
        if path.exists():
            return path.read_text().strip()
        self.home.mkdir(parents=True, exist_ok=True)
        token = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token + "\n")
        return token

    @property
    def reader(self) -> ObjectReader:
        """Read-only lookups of stored objects (what admission gets), for in-process helpers."""
        return self.engine.reader

    def serve_pod_streams(self, streamer: PodStreamer | None) -> None:
        """Route ``pods/exec``, ``pods/attach`` and ``pods/portforward`` to ``streamer``: the
        kubelet side, registered by whoever runs pods next to this server (None: answered
        503, as no kubelet is there)."""
        self.http.streamer = streamer
        # Webhooks behind a Service reach their pod the same way (its network namespace).
        self.webhooks.dial = streamer.dial if streamer is not None else None

    @property
    def url(self) -> str:
        scheme = "https" if self._cert is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def ca_pem(self) -> bytes | None:
        """The CA that signed the serving certificate (None over plain http)."""
        return self._cert.ca_pem if self._cert is not None else None

    def _default_loaded(self) -> None:
        """Custom objects as read from storage get their CRD's defaults (not written back)."""
        for res in self.registry.stored():
            if res.custom:
                self.store.revise_loaded(res.key, self.engine.schema.read_defaults)
        self.store.subscribe(self._crd_changed)

    def _crd_changed(self, change: Change) -> None:
        """A CRD installed, changed or removed for a served kind: its objects are read with
        the schema now in force, as kube-apiserver reads them from etcd with it."""
        if change.resource != _CRDS_KEY:
            return
        spec = obj_at(change.obj, "spec")
        group, plural = spec.get("group"), obj_at(spec, "names").get("plural")
        for res in self.registry.stored():
            if res.custom and res.group == group and res.plural == plural:
                self.store.revise_loaded(res.key, self.engine.schema.read_defaults)

    async def start(self) -> None:
        """Open storage, create the default namespaces and seed objects, then listen."""
        await self.store.open()
        self._default_loaded()
        await self.engine.ensure(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                for n in DEFAULT_NAMESPACES
            ]
        )
        await self.engine.settle_namespaces()
        if self.policy is not None:
            await self.engine.ensure(bootstrap_policy())
        seeds = self._seed() if callable(self._seed) else self._seed
        await self.engine.ensure(list(seeds))
        runner = web.AppRunner(
            self.http.app(), handler_cancellation=True, access_log=None, shutdown_timeout=1.0
        )
        await runner.setup()
        ssl_context = self._cert.ssl_context() if self._cert is not None else None
        assert runner.server is not None
        # Plain requests are answered by the front; streams and upgrades by aiohttp.
        self._front = Front(self.http, runner.server)
        self._runner = runner
        self.port = await self._front.start(self.host, self.port, ssl_context)
        self.http.server_address = f"{self.host}:{self.port}"
        await self._publish_kubernetes_service()

    async def _publish_kubernetes_service(self) -> None:
        """The ``kubernetes`` Service in ``default`` and its Endpoints at this server's address,
        as kube-apiserver keeps them (``kubectl cluster-info`` and in-cluster clients look)."""
        labels = {"component": "apiserver", "provider": "kubernetes"}
        port = {"name": "https", "protocol": "TCP"}
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
            # No virtual IPs on the local engine: the name resolves to the endpoints.
            "spec": {
                "type": "ClusterIP",
                "clusterIP": "None",
                "ports": [{**port, "port": 443, "targetPort": self.port}],
            },
        }
        endpoints: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
            "subsets": [{"addresses": [{"ip": self.host}], "ports": [{**port, "port": self.port}]}],
        }
        await self.engine.ensure([service, endpoints], manager="kube-apiserver")
        res = self.registry.by_kind("v1", "Endpoints")
        assert res is not None
        current = self.engine.get(res, "default", "kubernetes")
        if current.get("subsets") != endpoints["subsets"]:  # the port changed since last time
            endpoints["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await self.engine.replace(
                res, "default", "kubernetes", endpoints, None, WriteOptions("kube-apiserver")
            )

    async def close(self) -> None:
        """End open watches and log follows, stop listening, then flush and close storage."""
        self.http.close_streams()
        if self._front is not None:
            front, self._front = self._front, None
            await front.stop()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            handlers = runner.server.connections if runner.server is not None else []
            transports = [h.transport for h in handlers if h.transport is not None]
            await runner.cleanup()
            _abort_lingering(transports)
            await asyncio.sleep(0)
        await self.engine.settle_controllers()
        await self.webhooks.close()
        await self.store.close()
        if self.audit is not None:
            self.audit.close()

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def kubeconfig(self, context: str = CONTEXT) -> dict[str, Any]:
        return kubeconfig_dict(self.url, self.token, self.ca_pem, context)

    def write_kubeconfig(self, path: Path | None = None, context: str = CONTEXT) -> Path:
        """Write the kubeconfig (mode 0600) to ``path`` (default ``<home>/kubeconfig``)."""
        target = Path(path) if path is not None else self.home / "kubeconfig"
        target.parent.mkdir(parents=True, exist_ok=True)
        # Written beside and renamed into place: a reader never sees half a file.
        scratch = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(self.kubeconfig(context), fh, sort_keys=False)
        os.replace(scratch, target)
        return target
