"""The embedded Kubernetes API server (aiohttp + SQLite) of the local control plane.

Public surface: ``ApiServer`` (async start/close), ``ServerThread`` (run one in a background
thread), the ``Admission`` protocol with ``PermissiveAdmission``, ``TrainJobDefaulter`` and
``ChainAdmission``, ``ObjectReader``, and ``ResourceDef`` for adding kinds as data.
"""

from __future__ import annotations

from kubetrain.local.apiserver.admission import (
    Admission,
    ChainAdmission,
    ObjectReader,
    Operation,
    PermissiveAdmission,
    TrainJobDefaulter,
)
from kubetrain.local.apiserver.resources import PrinterColumn, ResourceDef
from kubetrain.local.apiserver.server import (
    CONTEXT,
    DEFAULT_NAMESPACES,
    ApiServer,
    default_home,
    kubeconfig_dict,
)
from kubetrain.local.apiserver.thread import ServerThread

__all__ = [
    "CONTEXT",
    "DEFAULT_NAMESPACES",
    "Admission",
    "ApiServer",
    "ChainAdmission",
    "ObjectReader",
    "Operation",
    "PermissiveAdmission",
    "PrinterColumn",
    "ResourceDef",
    "ServerThread",
    "TrainJobDefaulter",
    "default_home",
    "kubeconfig_dict",
]
