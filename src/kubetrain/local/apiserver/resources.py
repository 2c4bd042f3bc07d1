"""What the server serves: one ``ResourceDef`` per resource, kept in a ``Registry``.

Kinds are data. The built-in table below covers the core kinds the control plane needs and
schema-less entries for the custom kinds; a CRD manifest passed to the server replaces the
matching entry with one that carries the CRD's schema, printer columns and short names.
Adding a kind is adding a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kubetrain.kube import kinds as K
from kubetrain.kube.kinds import Kind

__all__ = ["BUILTIN_RESOURCES", "PrinterColumn", "Registry", "ResourceDef", "resource_from_crd"]

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """One Table column: a JSONPath into the object, or a named computed cell (``computed``)."""

    name: str
    type: str = "string"
    json_path: str = ""
    computed: str = ""
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True, slots=True)
class ResourceDef:
    """One served resource (a plural under a group/version) and the rules that depend on its kind."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    printer_columns: tuple[PrinterColumn, ...] = ()
    # openAPIV3Schema of a CRD: when set, writes are pruned, defaulted and validated against it.
    schema: Mapping[str, Any] | None = None
    # Custom resources refuse strategic merge (415) and need resourceVersion on PUT.
    custom: bool = False
    # Whether metadata.generation is kept (bumped on changes outside metadata and status).
    has_generation: bool = True
    # Extra field-selector labels beyond metadata.name / metadata.namespace.
    field_labels: tuple[str, ...] = ()
    # A status stamped on create when the body's status is reset (pods start Pending).
    initial_status: Mapping[str, Any] | None = None
    # Served as a view of another resource's objects (a key of ``conversions.VIEWS``).
    view: str = ""
    # Top-level fields the apiserver's defaulting fills in on create when absent.
    create_defaults: Mapping[str, Any] | None = None

    @classmethod
    def of(
        cls,
        kind: Kind,
        singular: str = "",
        short_names: tuple[str, ...] = (),
        categories: tuple[str, ...] = (),
        **rules: Any,
    ) -> ResourceDef:
        """A built-in resource: its identity from the one kind table (``kubetrain.kube.kinds``),
        its serving rules from the arguments."""
        group, _, version = kind.api_version.rpartition("/")
        return cls(
            group, version, kind.kind, kind.plural, kind.namespaced,
            singular, short_names, categories, **rules,
        )  # fmt: skip

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """Storage key, independent of the version: ``trainer.kubeflow.org/trainjobs``."""
        return f"{self.group}/{self.plural}"

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def list_kind(self) -> str:
        return self.kind + "List"


def _age() -> PrinterColumn:
    return PrinterColumn("Age", "date", json_path=".metadata.creationTimestamp")


_NAME_AGE = (_age(),)

# kubectl get -o wide's extra columns for workloads (Containers, Images, Selector).
_WORKLOAD_WIDE = (
    PrinterColumn("Containers", computed="containers", priority=1),
    PrinterColumn("Images", computed="images", priority=1),
    PrinterColumn("Selector", computed="selector", priority=1),
)

_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)


BUILTIN_RESOURCES: tuple[ResourceDef, ...] = (
    ResourceDef.of(K.NAMESPACE, "namespace", ("ns",),
        subresources=frozenset({"status"}),
        printer_columns=(PrinterColumn("Status", json_path=".status.phase"), _age()),
        has_generation=False, field_labels=("status.phase",), initial_status={"phase": "Active"},
    ),
    ResourceDef.of(K.POD, "pod", ("po",), ("all",),
        subresources=frozenset({"status", "log", "exec", "attach", "portforward"}),
        printer_columns=(
            PrinterColumn("Ready", computed="pod_ready"),
            PrinterColumn("Status", computed="pod_status"),
            PrinterColumn("Restarts", computed="pod_restarts"),
            _age(),
            PrinterColumn("IP", json_path=".status.podIP", priority=1),
            PrinterColumn("Node", json_path=".spec.nodeName", priority=1),
        ),
        field_labels=(
            "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "status.phase", "status.podIP", "status.nominatedNodeName",
        ),
        initial_status={"phase": "Pending"},
        has_generation=False,  # Kubernetes 1.32 pods carry no generation (added in 1.33)
    ),
    ResourceDef.of(K.CONFIGMAP, "configmap", ("cm",),
        printer_columns=(PrinterColumn("Data", "integer", computed="data_count"), _age()),
        has_generation=False,
    ),
    ResourceDef.of(K.SECRET, "secret",
        printer_columns=(PrinterColumn("Type", json_path=".type"), PrinterColumn("Data", "integer", computed="data_count"), _age()),
        has_generation=False, field_labels=("type",), create_defaults={"type": "Opaque"},
    ),
    ResourceDef.of(K.SERVICE_ACCOUNT, "serviceaccount", ("sa",),
        printer_columns=(PrinterColumn("Secrets", "integer", computed="sa_secrets"), _age()), has_generation=False,
    ),
    ResourceDef.of(K.EVENT, "event", ("ev",),
        printer_columns=(
            PrinterColumn("Last Seen", computed="event_last_seen"),
            PrinterColumn("Type", json_path=".type"),
            PrinterColumn("Reason", json_path=".reason"),
            PrinterColumn("Object", computed="event_object"),
            PrinterColumn("Message", json_path=".message"),
        ),
        has_generation=False, field_labels=_EVENT_FIELDS,
    ),
    ResourceDef.of(K.EVENTS_EVENT, "event", ("ev",),
        printer_columns=(
            PrinterColumn("Type", json_path=".type"),
            PrinterColumn("Reason", json_path=".reason"),
            PrinterColumn("Note", json_path=".note"),
            _age(),
        ),
        has_generation=False,
        field_labels=("regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid", "reason", "type", "reportingController"),
        view="events.k8s.io/v1/events",
    ),
    ResourceDef.of(K.NODE, "node", ("no",),
        subresources=frozenset({"status"}),
        printer_columns=(
            PrinterColumn("Status", computed="node_status"),
            _age(),
            PrinterColumn("Version", json_path=".status.nodeInfo.kubeletVersion"),
        ),
        has_generation=False, field_labels=("spec.unschedulable",),
    ),
    ResourceDef.of(K.LIMIT_RANGE, "limitrange", ("limits",), printer_columns=_NAME_AGE, has_generation=False),
    # Services name pods for the local engine's pod network (no virtual IPs: a name resolves
    # to its endpoints' pod IPs, as a headless Service's does).
    ResourceDef.of(K.SERVICE, "service", ("svc",), ("all",),
        subresources=frozenset({"status"}),
        printer_columns=(
            PrinterColumn("Type", json_path=".spec.type"),
            PrinterColumn("Cluster-IP", json_path=".spec.clusterIP"),
            PrinterColumn("External-IP", computed="service_external_ips"),
            PrinterColumn("Port(s)", computed="service_ports"),
            _age(),
            PrinterColumn("Selector", computed="service_selector", priority=1),
        ),
        has_generation=False, initial_status={"loadBalancer": {}},
    ),
    ResourceDef.of(K.PRIORITY_CLASS, "priorityclass", ("pc",),
        printer_columns=(PrinterColumn("Value", "integer", json_path=".value"), PrinterColumn("Global-Default", "boolean", json_path=".globalDefault"), _age()),
        has_generation=False,
    ),
    ResourceDef.of(K.RUNTIME_CLASS, "runtimeclass",
        printer_columns=(PrinterColumn("Handler", json_path=".handler"), _age()), has_generation=False,
    ),
    ResourceDef.of(K.LEASE, "lease",
        printer_columns=(PrinterColumn("Holder", json_path=".spec.holderIdentity"), _age()), has_generation=False,
    ),
    ResourceDef.of(K.POD_GROUP, "podgroup", ("pg", "pgs"),
        subresources=frozenset({"status"}), printer_columns=_NAME_AGE, custom=True,
    ),
    ResourceDef.of(K.VOLCANO_POD_GROUP, "podgroup", ("pg", "podgroup-v1beta1"),
        subresources=frozenset({"status"}), printer_columns=_NAME_AGE, custom=True,
    ),
    # Schema-less stand-ins, replaced by the CRD-backed definitions when manifests are given.
    ResourceDef.of(K.TRAINJOB, "trainjob",
        subresources=frozenset({"status"}),
        printer_columns=(PrinterColumn("State", json_path=".status.conditions[-1:].type"), _age()), custom=True,
    ),
    ResourceDef.of(K.TRAINING_RUNTIME, "trainingruntime", printer_columns=_NAME_AGE, custom=True),
    ResourceDef.of(K.CLUSTER_TRAINING_RUNTIME, "clustertrainingruntime",
        printer_columns=_NAME_AGE, custom=True,
    ),
    ResourceDef.of(K.JOBSET, "jobset",
        subresources=frozenset({"status"}), printer_columns=_NAME_AGE, custom=True,
    ),
    # Katib's kinds (kubeflow.org/v1beta1): its CRDs carry no schema (x-kubernetes-preserve-
    # unknown-fields); Katib's webhooks do all checking, here kubetrain.runtime.katib's admission.
    *(
        ResourceDef.of(
            kind, kind.kind.lower(),
            categories=("all", "kubeflow", "katib"), subresources=frozenset({"status"}),
            printer_columns=(
                PrinterColumn("Type", json_path=".status.conditions[-1:].type"),
                PrinterColumn("Status", json_path=".status.conditions[-1:].status"),
                *extra,
                _age(),
            ),
            custom=True,
        )
        for kind, extra in (
            (K.EXPERIMENT, ()),
            (K.TRIAL, ()),
            (
                K.SUGGESTION,
                (
                    PrinterColumn("Requested", "string", json_path=".spec.requests"),
                    PrinterColumn("Assigned", "string", json_path=".status.suggestionCount"),
                ),
            ),
        )
    ),
    # The core kinds operators touch next to a TrainJob (Helm charts, Katib, Kueue, the official
    # client's e2e suite), with kubectl's printer columns (k8s.io/kubernetes pkg/printers) and
    # the subresources Kubernetes serves for them.
    ResourceDef.of(K.JOB, "job", (), ("all",),
        subresources=frozenset({"status"}),
        printer_columns=(
            PrinterColumn("Status", computed="job_status"),
            PrinterColumn("Completions", computed="job_completions"),
            PrinterColumn("Duration", computed="job_duration"),
            _age(),
            *_WORKLOAD_WIDE,
        ),
        field_labels=("status.successful",),
    ),
    ResourceDef.of(K.DEPLOYMENT, "deployment", ("deploy",), ("all",),
        subresources=frozenset({"status", "scale"}),
        printer_columns=(
            PrinterColumn("Ready", computed="ready_of_replicas"),
            PrinterColumn("Up-to-date", "integer", computed="count:.status.updatedReplicas"),
            PrinterColumn("Available", "integer", computed="count:.status.availableReplicas"),
            _age(),
            *_WORKLOAD_WIDE,
        ),
    ),
    ResourceDef.of(K.REPLICA_SET, "replicaset", ("rs",), ("all",),
        subresources=frozenset({"status", "scale"}),
        printer_columns=(
            PrinterColumn("Desired", "integer", computed="desired_replicas"),
            PrinterColumn("Current", "integer", computed="count:.status.replicas"),
            PrinterColumn("Ready", "integer", computed="count:.status.readyReplicas"),
            _age(),
            *_WORKLOAD_WIDE,
        ),
    ),
    ResourceDef.of(K.DAEMON_SET, "daemonset", ("ds",), ("all",),
        subresources=frozenset({"status"}),
        printer_columns=(
            PrinterColumn("Desired", "integer", computed="count:.status.desiredNumberScheduled"),
            PrinterColumn("Current", "integer", computed="count:.status.currentNumberScheduled"),
            PrinterColumn("Ready", "integer", computed="count:.status.numberReady"),
            PrinterColumn("Up-to-date", "integer", computed="count:.status.updatedNumberScheduled"),
            PrinterColumn("Available", "integer", computed="count:.status.numberAvailable"),
            PrinterColumn("Node Selector", computed="node_selector"),
            _age(),
            *_WORKLOAD_WIDE,
        ),
    ),
    ResourceDef.of(K.STATEFUL_SET, "statefulset", ("sts",), ("all",),
        subresources=frozenset({"status", "scale"}),
        printer_columns=(
            PrinterColumn("Ready", computed="ready_of_replicas"),
            _age(),
            *_WORKLOAD_WIDE[:2],
        ),
    ),
    ResourceDef.of(K.REPLICATION_CONTROLLER, "replicationcontroller",
        ("rc",), ("all",),
        subresources=frozenset({"status", "scale"}),
        printer_columns=(
            PrinterColumn("Desired", "integer", computed="desired_replicas"),
            PrinterColumn("Current", "integer", computed="count:.status.replicas"),
            PrinterColumn("Ready", "integer", computed="count:.status.readyReplicas"),
            _age(),
            *_WORKLOAD_WIDE,
        ),
        field_labels=("status.replicas",),
    ),
    ResourceDef.of(K.ENDPOINTS, "endpoints", ("ep",),
        printer_columns=(PrinterColumn("Endpoints", computed="endpoints"), _age()),
        has_generation=False,
    ),
    ResourceDef.of(K.ENDPOINT_SLICE, "endpointslice",
        printer_columns=(
            PrinterColumn("AddressType", json_path=".addressType"),
            PrinterColumn("Ports", computed="slice_ports"),
            PrinterColumn("Endpoints", computed="slice_endpoints"),
            _age(),
        ),
    ),
    *(
        ResourceDef.of(
            kind, kind.kind.lower(),
            printer_columns=(
                PrinterColumn("Created At", "string", computed="created_at", format="date-time"),
            ) if kind.kind.endswith("Role") else (
                PrinterColumn("Role", computed="binding_role"),
                _age(),
                PrinterColumn("Users", computed="binding_users", priority=1),
                PrinterColumn("Groups", computed="binding_groups", priority=1),
                PrinterColumn("ServiceAccounts", computed="binding_service_accounts", priority=1),
            ),
            has_generation=False,
        )
        for kind in (K.ROLE, K.CLUSTER_ROLE, K.ROLE_BINDING, K.CLUSTER_ROLE_BINDING)
    ),
    ResourceDef.of(K.API_SERVICE, "apiservice",
        categories=("api-extensions",),
        subresources=frozenset({"status"}),
        printer_columns=(
            PrinterColumn("Service", computed="apiservice_service"),
            PrinterColumn("Available", computed="apiservice_available"),
            _age(),
        ),
        has_generation=False,
    ),
    # Stored for `kubectl apply -k manifests/` (kubetrain.local.apiserver.crds); the kinds served
    # come from this table, not from stored CRDs.
    ResourceDef.of(
        K.CUSTOM_RESOURCE_DEFINITION, "customresourcedefinition", ("crd", "crds"), ("api-extensions",),
        subresources=frozenset({"status"}),
        printer_columns=(PrinterColumn("Created At", "string", computed="created_at", format="date-time"),),
    ),
    # Admission webhooks the API server calls (kubetrain.local.apiserver.webhooks).
    ResourceDef.of(K.VALIDATING_WEBHOOK_CONFIGURATION, "validatingwebhookconfiguration", printer_columns=_NAME_AGE),
    ResourceDef.of(K.MUTATING_WEBHOOK_CONFIGURATION, "mutatingwebhookconfiguration", printer_columns=_NAME_AGE),
)  # fmt: skip


def resource_from_crd(crd: Mapping[str, Any]) -> ResourceDef:
    """The served version of a CustomResourceDefinition manifest (the storage version)."""
    spec = crd["spec"]
    names = spec["names"]
    versions = [v for v in spec["versions"] if v.get("served", True)]
    version = next((v for v in versions if v.get("storage")), versions[0])
    columns = tuple(
        PrinterColumn(
            c["name"],
            c.get("type", "string"),
            json_path=c["jsonPath"],
            description=c.get("description", ""),
            priority=int(c.get("priority", 0)),
            format=c.get("format", ""),
        )
        for c in version.get("additionalPrinterColumns", ())
    )
    # A CRD without printer columns still shows AGE, as the real server does.
    if not any(c.json_path == ".metadata.creationTimestamp" for c in columns):
        columns = (*columns, _age())
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    return ResourceDef(
        group=spec["group"],
        version=version["name"],
        kind=names["kind"],
        plural=names["plural"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        singular=names.get("singular", names["kind"].lower()),
        short_names=tuple(names.get("shortNames", ())),
        categories=tuple(names.get("categories", ())),
        subresources=frozenset(version.get("subresources", {}) or {}),
        printer_columns=columns,
        schema=schema,
        custom=True,
    )


@dataclass
class Registry:
    """Resources by group/version/plural; also finds the resource of an object's apiVersion/kind."""

    _by_path: dict[tuple[str, str, str], ResourceDef] = field(default_factory=dict)
    _stored: list[ResourceDef] | None = None

    @classmethod
    def build(
        cls, crds: Iterable[Mapping[str, Any]] = (), extra: Iterable[ResourceDef] = ()
    ) -> Registry:
        reg = cls()
        for res in BUILTIN_RESOURCES:
            reg.add(res)
        for crd in crds:
            reg.add(resource_from_crd(crd))
        for res in extra:
            reg.add(res)
        return reg

    def add(self, res: ResourceDef) -> None:
        """Add or replace; a CRD for a built-in stand-in keeps nothing of the stand-in."""
        self._by_path[(res.group, res.version, res.plural)] = res
        self._stored = None

    def get(self, group: str, version: str, plural: str) -> ResourceDef | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceDef | None:
        group, _, version = api_version.rpartition("/")
        for res in self._by_path.values():
            if res.group == group and res.version == version and res.kind == kind:
                return res
        return None

    def by_key(self, key: str) -> ResourceDef | None:
        """The resource whose objects are stored under ``key`` (views excluded)."""
        for res in self.stored():
            if res.key == key:
                return res
        return None

    def stored(self) -> list[ResourceDef]:
        """Resources that store objects (not views), in a fixed order."""
        if self._stored is None:
            self._stored = [r for r in self if not r.view]
        return self._stored

    def __iter__(self) -> Iterator[ResourceDef]:
        return iter(sorted(self._by_path.values(), key=lambda r: (r.group, r.version, r.plural)))

    def group_versions(self) -> dict[str, list[str]]:
        """Group → its versions (core group is ``""``)."""
        out: dict[str, list[str]] = {}
        for res in self:
            versions = out.setdefault(res.group, [])
            if res.version not in versions:
                versions.append(res.version)
        return out

    def with_schema(self, res: ResourceDef, schema: Mapping[str, Any]) -> None:
        self.add(replace(res, schema=schema))
