"""Feature gates and the deployment facts rendering needs (``Environment``).

Both are plain immutable values so the core stays pure: whoever runs kubetrain (the controller,
the CLI, a test) decides them once and passes them in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "DEFAULT_GATES",
    "DEFAULT_MAX_NUM_NODES",
    "KNOWN_GATES",
    "MANAGER_SERVICE",
    "OPERATOR_NAMESPACE",
    "STATUS_SERVER_PORT",
    "Environment",
    "FeatureGateError",
    "FeatureGates",
    "SSHKeyPairFactory",
]

# Gates upstream v2.3 knows, with upstream's default. kubetrain turns TrainJobStatus on by
# default (the progress reporter needs it); `--feature-gates TrainJobStatus=false` gives
# upstream's default output.
KNOWN_GATES: Mapping[str, bool] = MappingProxyType({"TrainJobStatus": False})
DEFAULT_GATES: Mapping[str, bool] = MappingProxyType({"TrainJobStatus": True})

# kubetrain's sanity limit on numNodes (kubetrain.runtime.bounds): what a TrainJob may ask for.
DEFAULT_MAX_NUM_NODES = 1000

# Accepted spellings of booleans, as Go's strconv.ParseBool (what --feature-gates uses).
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


class FeatureGateError(ValueError):
    """A ``--feature-gates`` value that cannot be parsed, or names an unknown gate."""


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """Which optional upstream features are on. Hashable, so it can key caches."""

    trainjob_status: bool = DEFAULT_GATES["TrainJobStatus"]
    """``TrainJobStatus``: progress env vars, token volume and ``TJ-tls-config`` (trainer v2.3.0 pkg/statusserver/)."""

    @classmethod
    def parse(cls, text: str, *, base: FeatureGates | None = None) -> FeatureGates:
        """Parse ``Name=bool,Name=bool`` (Kubernetes' flag syntax) over ``base`` (kubetrain's defaults).

        Raises ``FeatureGateError`` for an unknown gate or a value that is not a Go boolean.
        """
        values = (base or cls()).as_dict()
        for raw in text.split(","):
            item = raw.strip()
            if not item:
                continue
            name, sep, value = item.partition("=")
            name, value = name.strip(), value.strip()
            if not sep:
                raise FeatureGateError(f"missing bool value for {name}")
            if name not in KNOWN_GATES:
                known = ", ".join(sorted(KNOWN_GATES))
                raise FeatureGateError(f"unrecognized feature gate: {name} (known: {known})")
            if value in _TRUE:
                values[name] = True
            elif value in _FALSE:
                values[name] = False
            else:
                raise FeatureGateError(f"invalid value of {name}={value}, err: not a boolean")
        return cls(trainjob_status=values["TrainJobStatus"])

    @classmethod
    def upstream_defaults(cls) -> FeatureGates:
        """Upstream v2.3's defaults (every alpha gate off)."""
        return cls(trainjob_status=KNOWN_GATES["TrainJobStatus"])

    def as_dict(self) -> dict[str, bool]:
        """``{"TrainJobStatus": ...}`` in the spelling of the flag."""
        return {"TrainJobStatus": self.trainjob_status}

    def __str__(self) -> str:
        return ",".join(f"{k}={str(v).lower()}" for k, v in self.as_dict().items())


# What the MPI plugin's Secret holds: (PEM "EC PRIVATE KEY", authorized_keys line), as returned
# by kubetrain.runtime.sshkeys.generate_ssh_keypair / ssh_keypair_from_seed.
SSHKeyPairFactory = Callable[[], tuple[str, str]]


# A stable, obviously fake CA used when nobody supplies the real one (CLI renders, tests).
_PLACEHOLDER_CA = (
    "-----BEGIN CERTIFICATE-----\n"
    "kubetrain placeholder: the controller copies ca.crt from the webhook certificate Secret\n"
    "-----END CERTIFICATE-----\n"
)


def _no_keys() -> tuple[str, str]:
    # Rendering must stay pure; a caller that renders MPI jobs injects a real generator
    # (kubetrain.runtime.sshkeys) or a fixed pair for reproducible output.
    raise RuntimeError(
        "Environment.ssh_keypair is not set: inject a key-pair factory to render MPI jobs"
    )


# Where upstream installs its controller; every name and port of the install derives from these.
OPERATOR_NAMESPACE = "kubeflow-system"
MANAGER_SERVICE = "kubeflow-trainer-controller-manager"
"""The Deployment, ServiceAccount and Service (webhooks and status server) of the controller."""
STATUS_SERVER_PORT = 10443


@dataclass(frozen=True, slots=True)
class Environment:
    """Deployment facts that shape rendered objects (upstream: the controller Configuration).

    Every field has upstream's default, so ``Environment()`` renders what a stock install does.
    """

    operator_namespace: str = OPERATOR_NAMESPACE
    """Namespace of the controller; part of the status server URL."""
    status_server_service: str = MANAGER_SERVICE
    """``certManagement.webhookServiceName``: the Service that fronts webhook and status server."""
    status_server_port: int = STATUS_SERVER_PORT
    """``statusServer.port``; part of ``KUBEFLOW_TRAINER_SERVER_URL``."""
    ca_pem: str = _PLACEHOLDER_CA
    """PEM text copied into ``TJ-tls-config`` (``ca.crt``); the controller passes the webhook
    Secret's ``ca.crt``. An empty string means "Secret has no ca.crt" and makes render fail
    like upstream ("failed to find status server ca.crt in tls secret")."""
    ssh_keypair: SSHKeyPairFactory = _no_keys
    """Factory for the MPI SSH key pair; called only when ``TJ-mpi-ssh-auth`` must be created.
    Inject a fixed pair for byte-for-byte reproducible renders."""
    uid_placeholder: str = "00000000-0000-0000-0000-000000000000"
    """ownerReferences[].uid when the TrainJob has no ``metadata.uid`` yet (CLI dry runs)."""
    namespace_default: str = "default"
    """Namespace assumed for a TrainJob without ``metadata.namespace``."""
    flux_view_image: str = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
    """Upstream reads ``FLUX_VIEW_IMAGE`` from the controller's environment; this is its default."""
    max_num_nodes: int = DEFAULT_MAX_NUM_NODES
    """kubetrain's sanity limit on ``numNodes`` (`kubetrain.runtime.bounds`); upstream has none."""

    @property
    def status_server_base_url(self) -> str:
        """``https://<service>.<operator ns>.svc:<port>``."""
        return f"https://{self.status_server_service}.{self.operator_namespace}.svc:{self.status_server_port}"
