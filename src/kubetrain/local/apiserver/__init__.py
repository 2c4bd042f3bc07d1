"""The embedded Kubernetes API server (aiohttp + SQLite) of the local control plane.

Public surface: ``ApiServer`` (async start/close), ``ServerThread`` (run one in a background
thread), the ``Admission`` protocol with ``PermissiveAdmission``, ``TrainJobDefaulter`` and
``ChainAdmission``, ``ObjectReader``, and ``ResourceDef`` for adding kinds as data.

Where it knowingly differs from kube-apiserver (keep these out of contract assertions):

- Server-side apply: maps merge; lists the schema declares ``x-kubernetes-list-type: map``
  merge element by element (TrainJob conditions, runtimePatches); other lists, and every list
  of a core kind, are atomic. Ownership is tracked per manager in ``managedFields`` (a field or
  element a manager applied before and now omits is removed unless another manager owns it);
  conflicts are detected only against other *apply* managers, and fields set by plain updates
  are owned list-atomically.
- Strategic merge patch (core kinds only; custom kinds get 415) is a merge patch in which lists
  of objects that all have ``name`` merge by name, with ``$patch: delete|replace``; other
  directives are dropped.
- Schemas (pruning, defaulting, validation) apply to the kinds ``kubetrain.api`` has schemas for
  (the three Trainer kinds and JobSet); core kinds and PodGroups are stored as sent. CEL rules are
  left to admission (the runtime layer's ``validate()``).
- A list is served at the current resourceVersion (``resourceVersion``/``resourceVersionMatch``
  on lists are ignored); ``continue`` tokens page by (namespace, name) over current data.
- Watch history lives in memory (``history`` changes): after a restart, or past that window, a
  watch from an older resourceVersion gets the 410 ERROR event and the client relists.
- Deletion is immediate unless finalizers hold it (pods too: no grace period); the garbage
  collector's work (propagation, ownerless objects) happens synchronously within the request.
- events.k8s.io/v1 Events are a converted view of the stored core/v1 Events (as in Kubernetes);
  strategic merge is not offered on that view, and nothing expires Events.
- Request bodies are JSON or YAML, plus protobuf for the four kinds kubectl 1.32+ creates that
  way (Namespace, ConfigMap, Secret, ServiceAccount); answers are always JSON.
- Core kinds get only the defaults clients rely on (Pod/Namespace status, Secret type).
- ``pods/log?timestamps=true`` stamps lines with the time they are read; ``sinceSeconds`` and
  ``sinceTime`` are ignored.
- No RBAC: one bearer token (``<home>/apiserver.token``) grants everything; ``/version`` and the
  health endpoints answer without it. ``/openapi/v2`` is not served (kubectl uses v3). No
  exec/attach/port-forward, no TokenReview/SubjectAccessReview.
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
