"""``kubetrain controller`` in a cluster: one process, four listeners, one leader.

Start order (upstream's, trainer v2.3.0 cmd/trainer-controller-manager/main.go): read the Configuration, serve ``/healthz`` at once;
make sure the webhook certificate exists (self-managed: CA and serving cert kept in Secret
``kubeflow-trainer-webhook-cert`` and their CA injected into both webhook configurations; with
cert-manager: the mounted files), then start the webhook server, the status server (when the
``TrainJobStatus`` gate is on) and the metrics server on every replica, and only then the
controller, whose workers run on the Lease holder alone. ``/readyz`` answers once the webhook
server serves: followers are ready too, because the webhook Service must keep routing to them
while leadership moves.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aiohttp import web

from kubetrain.api.access import list_at, obj_at
from kubetrain.api.types import Obj
from kubetrain.controller.leader import LeaderElector
from kubetrain.controller.manager import Controller
from kubetrain.controller.pki import ServingCert, ensure_serving_cert, service_dns_names
from kubetrain.controller.statusserver import StatusServer, TokenReviewVerifier
from kubetrain.controller.webhook import (
    MUTATING_CONFIGURATION,
    VALIDATING_CONFIGURATION,
    AdmissionHandler,
    AdmissionRules,
    WebhookServer,
)
from kubetrain.kube.client import (
    TRANSPORT_ERRORS,
    ApiError,
    KubeClient,
)
from kubetrain.kube.kinds import SECRET
from kubetrain.runtime.config import (
    MANAGER_SERVICE,
    OPERATOR_NAMESPACE,
    STATUS_SERVER_PORT,
    Environment,
    FeatureGates,
)

__all__ = [
    "CONFIG_API_VERSION",
    "ClusterController",
    "ConfigError",
    "ControllerConfig",
    "ensure_webhook_cert",
    "inject_ca_bundle",
    "load_config_file",
    "operator_namespace",
    "parse_bind_address",
    "parse_duration",
]

log = logging.getLogger(__name__)

CONFIG_API_VERSION = "config.trainer.kubeflow.org/v1alpha1"
SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
# How long a stopping controller answers the admission reviews it has received: a review's
# own deadline is the webhook's timeoutSeconds (10 s in the manifests, kube-apiserver's default).
WEBHOOK_STOP_GRACE_S = 10.0
_ADMISSION_REGISTRATION = "admissionregistration.k8s.io/v1"
_TLS_VERSIONS = {
    "1.0": ssl.TLSVersion.TLSv1,
    "1.1": ssl.TLSVersion.TLSv1_1,
    "1.2": ssl.TLSVersion.TLSv1_2,
    "1.3": ssl.TLSVersion.TLSv1_3,
}


class ConfigError(ValueError):
    """A Configuration file or flag value that cannot be used."""


def parse_duration(value: Any) -> float:
    """Seconds in a Go duration (``15s``, ``1m30s``, ``500ms``) or a plain number of seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ConfigError(f"invalid duration {value!r}")
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    return sum(float(n) * scale[u] for n, u in parts)


def parse_bind_address(address: str) -> tuple[str, int]:
    """``":8081"`` / ``"0.0.0.0:8081"`` / ``"0"`` → (host, port); an empty host binds all."""
    host, _, port = address.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"invalid bind address {address!r}") from None
    if not 0 <= number <= 65535:
        raise ConfigError(f"port out of range in {address!r}")
    return host.strip("[]") or "0.0.0.0", number


def operator_namespace(default: str = OPERATOR_NAMESPACE) -> str:
    """The namespace this pod runs in (its service account's), else ``default``."""
    try:
        return SA_NAMESPACE_FILE.read_text().strip() or default
    except OSError:
        return default


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Everything ``kubetrain controller`` can be told; defaults are upstream's (trainer v2.3.0 manifests/base/manager/controller_manager_config.yaml).

    ``namespace`` (kubetrain only) limits the controller to one namespace; None watches all.
    Ports of 0 pick free ports (tests); ``metrics_port`` or ``health_port`` < 0 turns that
    listener off. ``ca_refresh_s``: how often the CA bundle in the webhook configurations
    (self-managed certificates) or the mounted certificate files (cert-manager) are checked.
    """

    namespace: str | None = None
    operator_namespace: str = OPERATOR_NAMESPACE
    gates: FeatureGates = field(default_factory=FeatureGates)
    concurrency: int = 5
    webhook_host: str = "0.0.0.0"
    webhook_port: int = 9443
    webhook_enabled: bool = True
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8443
    metrics_secure: bool = True
    health_host: str = "0.0.0.0"
    health_port: int = 8081
    leader_elect: bool = True
    lease_name: str = "trainer.kubeflow.org"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    cert_management: bool = True
    webhook_service: str = MANAGER_SERVICE
    webhook_secret: str = "kubeflow-trainer-webhook-cert"
    cert_dir: Path = DEFAULT_CERT_DIR
    status_port: int = STATUS_SERVER_PORT
    tls_min_version: str | None = None
    ca_refresh_s: float = 30.0

    def validate(self) -> None:
        """Upstream's checks (pkg/config/validation.go) on what kubetrain uses."""
        for name in ("webhook_port", "status_port"):
            port = getattr(self, name)
            if not 0 <= port <= 65535:
                raise ConfigError(f"{name} must be a port number, got {port}")
        if self.concurrency < 1:
            raise ConfigError("groupKindConcurrency of TrainJob must be >= 1")
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ConfigError("need leaseDuration > renewDeadline > retryPeriod > 0")
        if self.tls_min_version is not None and self.tls_min_version not in _TLS_VERSIONS:
            raise ConfigError(f"tls.minVersion must be one of {sorted(_TLS_VERSIONS)}")


def _section(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj_at(doc, key)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a mapping")
    return value


def load_config_file(path: Path, base: ControllerConfig | None = None) -> ControllerConfig:
    """Read upstream's ``Configuration`` (``config.trainer.kubeflow.org/v1alpha1``) over ``base``.

    Fields kubetrain has no use for (``clientConnection``, status-server QPS) are accepted and
    ignored, so upstream's shipped file works unchanged.
    """
    import yaml

    config = base or ControllerConfig()
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"{path}: {err}") from err
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{path}: not a mapping")
    if doc.get("kind", "Configuration") != "Configuration":
        raise ConfigError(f"{path}: kind must be Configuration")
    try:
        changes = _changes(doc, config)
    except (TypeError, ValueError) as err:  # ConfigError, or a port that is not a number
        raise ConfigError(f"{path}: {err}") from err
    result = replace(config, **changes)
    result.validate()
    return result


def _changes(doc: Mapping[str, Any], config: ControllerConfig) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    webhook = _section(doc, "webhook")
    if "port" in webhook:
        changes["webhook_port"] = int(webhook["port"])
    if webhook.get("host"):
        changes["webhook_host"] = str(webhook["host"])
    metrics = _section(doc, "metrics")
    if "bindAddress" in metrics:
        if str(metrics["bindAddress"]) == "0":  # controller-runtime's "off"
            changes["metrics_port"] = -1
        else:
            changes["metrics_host"], changes["metrics_port"] = parse_bind_address(
                str(metrics["bindAddress"])
            )
    if "secureServing" in metrics:
        changes["metrics_secure"] = bool(metrics["secureServing"])
    health = _section(doc, "health")
    if "healthProbeBindAddress" in health:
        changes["health_host"], changes["health_port"] = parse_bind_address(
            str(health["healthProbeBindAddress"])
        )
    for key, wanted in (("readinessEndpointName", "readyz"), ("livenessEndpointName", "healthz")):
        if health.get(key, wanted) != wanted:
            raise ConfigError(f"health.{key}: kubetrain serves only /{wanted}")
    election = _section(doc, "leaderElection")
    if "leaderElect" in election:
        changes["leader_elect"] = bool(election["leaderElect"])
    if election.get("resourceName"):
        changes["lease_name"] = str(election["resourceName"])
    if election.get("resourceNamespace"):
        changes["operator_namespace"] = str(election["resourceNamespace"])
    for key, attr in (
        ("leaseDuration", "lease_duration"),
        ("renewDeadline", "renew_deadline"),
        ("retryPeriod", "retry_period"),
    ):
        if key in election:
            changes[attr] = parse_duration(election[key])
    concurrency = _section(_section(doc, "controller"), "groupKindConcurrency")
    if "TrainJob.trainer.kubeflow.org" in concurrency:
        changes["concurrency"] = int(concurrency["TrainJob.trainer.kubeflow.org"])
    certs = _section(doc, "certManagement")
    if "enable" in certs:
        changes["cert_management"] = bool(certs["enable"])
    if certs.get("webhookServiceName"):
        changes["webhook_service"] = str(certs["webhookServiceName"])
    if certs.get("webhookSecretName"):
        changes["webhook_secret"] = str(certs["webhookSecretName"])
    status = _section(doc, "statusServer")
    if "port" in status:
        changes["status_port"] = int(status["port"])
    gates = _section(doc, "featureGates")
    if gates:
        from kubetrain.runtime.config import FeatureGateError

        text = ",".join(f"{k}={str(v).lower()}" for k, v in gates.items())
        try:
            changes["gates"] = FeatureGates.parse(text, base=config.gates)
        except FeatureGateError as err:
            raise ConfigError(f"featureGates: {err}") from err
    tls = _section(doc, "tls")
    if tls.get("minVersion"):
        changes["tls_min_version"] = str(tls["minVersion"])
    return changes


# --- certificates -------------------------------------------------------------------------------

_CERT_FILES = ("ca.crt", "ca.key", "tls.crt", "tls.key")


async def ensure_webhook_cert(
    client: KubeClient, *, namespace: str, secret: str, service: str, cert_dir: Path
) -> ServingCert:
    """The serving certificate for ``<service>.<namespace>.svc``, shared by every replica.

    The Secret is the source of truth: a replica that finds a complete one writes its files
    to ``cert_dir`` and uses them; otherwise it creates a CA and certificate and stores them.
    Writes carry the resourceVersion, so when two replicas race the loser reads the winner's
    certificate on its next pass instead of overwriting it.
    """
    names = service_dns_names(service, namespace)
    cert_dir.mkdir(parents=True, exist_ok=True)
    for _ in range(10):
        try:
            current: Obj | None = await client.get(
                SECRET.api_version, SECRET.plural, secret, namespace=namespace
            )
        except ApiError as err:
            if not err.not_found:
                raise
            current = None
        data = dict(obj_at(current, "data"))
        if all(data.get(f) for f in _CERT_FILES):
            for name in _CERT_FILES:
                target = cert_dir / name
                target.write_bytes(base64.b64decode(data[name]))
                if name.endswith(".key"):
                    target.chmod(0o600)
        cert = ensure_serving_cert(cert_dir, names, [])
        wanted = {f: base64.b64encode((cert_dir / f).read_bytes()).decode() for f in _CERT_FILES}
        if all(data.get(f) == wanted[f] for f in _CERT_FILES):
            return cert
        try:
            if current is None:
                body: Obj = {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": secret, "namespace": namespace},
                    "type": "Opaque",
                    "data": wanted,
                }
                await client.create(SECRET.api_version, SECRET.plural, body)
            else:
                await client.replace(
                    SECRET.api_version, SECRET.plural, {**current, "data": {**data, **wanted}}
                )
        except ApiError as err:
            if err.conflict or err.code == 409:
                continue  # another replica stored its certificate first: use that one
            raise
        log.info("stored the webhook certificate in Secret %s/%s", namespace, secret)
        return cert
    raise RuntimeError(f"could not agree on Secret {namespace}/{secret} after 10 attempts")


async def inject_ca_bundle(client: KubeClient, ca_pem: str) -> list[str]:
    """Put ``ca_pem`` in every webhook's ``clientConfig.caBundle`` of both configurations.

    Returns the names of the configurations it changed; a missing configuration is logged and
    skipped (the install may not have created it yet; the next pass will).
    """
    bundle = base64.b64encode(ca_pem.encode()).decode()
    changed: list[str] = []
    for plural, name in (
        ("validatingwebhookconfigurations", VALIDATING_CONFIGURATION),
        ("mutatingwebhookconfigurations", MUTATING_CONFIGURATION),
    ):
        try:
            config = await client.get(_ADMISSION_REGISTRATION, plural, name)
        except ApiError as err:
            if err.not_found:
                log.warning("%s %s not found; caBundle not injected", plural, name)
                continue
            raise
        webhooks = list_at(config, "webhooks")
        stale = [w for w in webhooks if obj_at(w, "clientConfig").get("caBundle") != bundle]
        if not stale:
            continue
        for w in stale:
            w.setdefault("clientConfig", {})["caBundle"] = bundle
        await client.replace(_ADMISSION_REGISTRATION, plural, config)
        changed.append(name)
        log.info("injected the CA bundle into %s %s", plural, name)
    return changed


def _ssl_context(cert: ServingCert, min_version: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert.cert_file, cert.key_file)
    context.minimum_version = _TLS_VERSIONS[min_version or "1.2"]
    context.set_alpn_protocols(["http/1.1"])  # upstream's default: no HTTP/2
    return context


async def _reload_on_change(
    context: ssl.SSLContext, cert: ServingCert, stop: asyncio.Event, period: float
) -> None:
    """Load the certificate files again when they change (cert-manager renews them in place);
    new TLS handshakes then use the new certificate, open connections keep the old one."""

    def stamp() -> tuple[float, float]:
        return cert.cert_file.stat().st_mtime, cert.key_file.stat().st_mtime

    seen = stamp()
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), period)
        try:
            now = stamp()
            if now != seen:
                context.load_cert_chain(cert.cert_file, cert.key_file)
                seen = now
                log.info("reloaded the serving certificate from %s", cert.cert_file)
        except (OSError, ssl.SSLError) as err:  # caught mid-update: try again next period
            log.warning("reloading the serving certificate: %s", err)


def _mounted_cert(cert_dir: Path) -> ServingCert:
    """Files mounted from a cert-manager Certificate's Secret (tls.crt, tls.key, ca.crt)."""
    cert_file, key_file, ca_file = cert_dir / "tls.crt", cert_dir / "tls.key", cert_dir / "ca.crt"
    missing = [str(p) for p in (cert_file, key_file) if not p.exists()]
    if missing:
        raise ConfigError(f"certManagement is off but {', '.join(missing)} missing")
    ca = ca_file.read_text() if ca_file.exists() else cert_file.read_text()
    return ServingCert(cert_file, key_file, ca)


# --- the process --------------------------------------------------------------------------------


class ClusterController:
    """The pieces of ``kubetrain controller`` around one client; ``run`` until ``stop``.

    ``rules`` are the admission rules shared with the embedded API server. After ``run``
    has started, ``webhook_port``, ``status_port``, ``metrics_port`` and ``health_port`` hold
    the bound ports (useful with port 0).
    """

    def __init__(
        self,
        client: KubeClient,
        config: ControllerConfig,
        rules: AdmissionRules,
        *,
        identity: str | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.rules = rules
        self.identity = identity
        self.cert: ServingCert | None = None
        self.controller: Controller | None = None
        self.webhook: WebhookServer | None = None
        self.status: StatusServer | None = None
        self.webhook_port = self.status_port = self.metrics_port = self.health_port = 0
        self.cert_ready = asyncio.Event()
        self._runners: list[web.AppRunner] = []

    # Health, readiness and metrics are built here rather than with probes.probe_app, whose
    # /readyz follows leadership: a follower must stay ready because it serves webhooks.
    def _health_app(self) -> web.Application:
        async def healthz(_request: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def readyz(_request: web.Request) -> web.Response:
            if self.cert_ready.is_set() and (self.webhook is None or self.webhook.started):
                return web.Response(text="ok")
            return web.Response(status=503, text="webhook certificate or server not ready")

        app = web.Application()
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        app.router.add_get("/metrics", self._metrics)
        return app

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(text=self.metrics_text(), content_type="text/plain", charset="utf-8")

    def metrics_text(self) -> str:
        """Prometheus text: the controller's reconcile metrics, leadership, its requests to the
        API server and webhook answers."""
        controller = self.controller
        text = ""
        if controller is not None:
            text = controller.metrics.prometheus(queue_depth=len(controller.queue))
        leader = controller is not None and controller.ready.is_set()
        lines = [
            "# HELP kubetrain_leader Whether this replica holds the Lease and reconciles.",
            "# TYPE kubetrain_leader gauge",
            f"kubetrain_leader {int(leader)}",
        ]
        lines += [
            "# HELP rest_client_requests_total Requests to the API server, by status code,"
            " method and host.",
            "# TYPE rest_client_requests_total counter",
        ]
        for (host, method, code), n in sorted(self.client.request_counts().items()):
            lines.append(
                f'rest_client_requests_total{{code="{code}",host="{host}",method="{method}"}} {n}'
            )
        if self.webhook is not None:
            lines += [
                "# HELP kubetrain_admission_total Admission reviews answered, by webhook and verdict.",
                "# TYPE kubetrain_admission_total counter",
            ]
            for (name, allowed), n in sorted(self.webhook.handler.counts.items()):
                verdict = "allowed" if allowed else "denied"
                lines.append(
                    f'kubetrain_admission_total{{webhook="{name}",verdict="{verdict}"}} {n}'
                )
        return text + "\n".join(lines) + "\n"

    async def _serve(
        self, app: web.Application, host: str, port: int, context: ssl.SSLContext | None
    ) -> int:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port, ssl_context=context)
        await site.start()
        self._runners.append(runner)
        server = getattr(site, "_server", None)  # aiohttp keeps the bound server private
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def _certificate(self) -> ServingCert:
        cfg = self.config
        if not cfg.cert_management:
            return _mounted_cert(cfg.cert_dir)
        return await ensure_webhook_cert(
            self.client,
            namespace=cfg.operator_namespace,
            secret=cfg.webhook_secret,
            service=cfg.webhook_service,
            cert_dir=cfg.cert_dir,
        )

    async def _keep_ca_injected(self, ca_pem: str, stop: asyncio.Event) -> None:
        # Re-check on a timer: `kubectl apply` of the install manifest resets caBundle.
        while not stop.is_set():
            try:
                await inject_ca_bundle(self.client, ca_pem)
            except ApiError as err:
                log.warning("injecting the CA bundle: %s", err)
            except TRANSPORT_ERRORS as err:
                log.warning("injecting the CA bundle: %s", err)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.config.ca_refresh_s)

    async def run(self, stop: asyncio.Event) -> None:
        """Serve and reconcile until ``stop`` is set; ``LeadershipLost`` ends it early."""
        cfg = self.config
        tasks: list[asyncio.Task[None]] = []
        try:
            if cfg.health_port >= 0:
                self.health_port = await self._serve(
                    self._health_app(), cfg.health_host, cfg.health_port, None
                )
            self.cert = cert = await self._certificate()
            context = _ssl_context(cert, cfg.tls_min_version)
            if cfg.cert_management and cfg.webhook_enabled:
                tasks.append(asyncio.create_task(self._keep_ca_injected(cert.ca_pem, stop)))
            if not cfg.cert_management:
                reload = _reload_on_change(context, cert, stop, cfg.ca_refresh_s)
                tasks.append(asyncio.create_task(reload))
            self.cert_ready.set()
            leader = None
            if cfg.leader_elect:
                leader = LeaderElector(
                    self.client,
                    namespace=cfg.operator_namespace,
                    name=cfg.lease_name,
                    identity=self.identity,
                    lease_duration=cfg.lease_duration,
                    renew_deadline=cfg.renew_deadline,
                    retry_period=cfg.retry_period,
                )
            # Built before the webhook server: admission reads the controller's caches.
            self.controller = Controller(
                self.client,
                namespace=cfg.namespace,
                gates=cfg.gates,
                environment=self._environment(),
                concurrency=cfg.concurrency,
                leader=leader,
            )
            if cfg.webhook_enabled:
                handler = AdmissionHandler(
                    self.client,
                    self.rules,
                    gates=cfg.gates,
                    environment=self._environment(),
                    caches=self.controller.caches,
                )
                self.webhook = WebhookServer(handler)
                self.webhook_port = await self.webhook.start(
                    cfg.webhook_host, cfg.webhook_port, context
                )
            if cfg.gates.trainjob_status:
                # Every replica serves status reports (upstream: no leader election for it).
                self.status = StatusServer(self.client, TokenReviewVerifier(self.client))
                self.status_port = await self.status.start(
                    cfg.webhook_host, cfg.status_port, context
                )
            if cfg.metrics_port >= 0:
                metrics_app = web.Application()
                metrics_app.router.add_get("/metrics", self._metrics)
                self.metrics_port = await self._serve(
                    metrics_app,
                    cfg.metrics_host,
                    cfg.metrics_port,
                    context if cfg.metrics_secure else None,
                )
            log.info(
                "kubetrain controller: webhooks on %d, status server on %s, namespace %s",
                self.webhook_port,
                self.status_port or "off",
                cfg.namespace or "(all)",
            )
            await self.controller.run(stop)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.webhook is not None:
                # The pod is already out of the Service's endpoints: reviews in flight finish.
                await self.webhook.stop(grace=WEBHOOK_STOP_GRACE_S)
            if self.status is not None:
                await self.status.stop()
            for runner in reversed(self._runners):
                await runner.cleanup()
            self._runners.clear()

    def _environment(self) -> Environment:
        cfg = self.config
        ca = self.cert.ca_pem if self.cert is not None else ""
        return Environment(
            operator_namespace=cfg.operator_namespace,
            status_server_service=cfg.webhook_service,
            status_server_port=cfg.status_port,
            ca_pem=ca,
        )
