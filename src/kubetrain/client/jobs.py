"""Job operations every command needs, over any Kubernetes API (local daemon or cluster).

Everything returns plain dicts or small dataclasses; every failure is a one-line
:class:`~kubetrain.client.errors.ClientError`. Custom resources are always written with an explicit
patch type: server-side apply for ``apply``, JSON merge patch for suspend/resume.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from kubetrain.api.access import obj_at
from kubetrain.api.labels import JOBSET_NAME_LABEL
from kubetrain.client import resources as R
from kubetrain.client.connection import FIELD_MANAGER, Connection
from kubetrain.client.errors import ClientError, NotFoundError, translate_errors
from kubetrain.client.state import job_state
from kubetrain.client.steps import Step, pod_selector, steps_from_pods
from kubetrain.client.view import JobView, parse_time
from kubetrain.runtime.core import runtime_ref

__all__ = ["ALL_NAMESPACES", "ApplyResult", "JobClient", "event_time_key", "plain"]

ALL_NAMESPACES = "*"
# Metadata only the server writes; never sent back in an apply.
_SERVER_META = frozenset(
    {
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "generation",
        "managedFields",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    }
)

Action = Literal["created", "configured", "unchanged"]


def plain(obj: Any) -> dict[str, Any]:
    """An object as the plain dict it was on the wire (objects with ``to_dict`` converted)."""
    if isinstance(obj, dict) and not hasattr(obj, "to_dict"):
        return obj
    result: dict[str, Any] = obj.to_dict()
    return result


def _selector(labels: dict[str, Any] | None) -> str | None:
    """A label selector from ``{key: value}`` (``None`` or ``...`` for "key exists")."""
    if not labels:
        return None
    return ",".join(k if v in (None, ...) else f"{k}={v}" for k, v in labels.items())


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """One applied object and what happened to it, in kubectl's words."""

    info: R.KindInfo
    name: str
    namespace: str | None
    action: Action
    obj: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.info.qualified}/{self.name} {self.action}"


def _what(info: R.KindInfo, name: str) -> str:
    return f'{info.plural}.{info.group} "{name}"' if info.group else f'{info.plural} "{name}"'


class JobClient:
    """Operations on TrainJobs, runtimes and their pods through one :class:`Connection`."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.client = conn.client
        self._discovered: dict[str, list[dict[str, Any]]] = {}

    @property
    def namespace(self) -> str:
        return self.conn.namespace

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> JobClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _errors(self, what: str = "") -> Any:
        return translate_errors(what, self.conn.server)

    def _ns(self, info: R.KindInfo, namespace: str | None) -> str | None:
        return (namespace or self.namespace) if info.namespaced else None

    def kind_of(self, obj: dict[str, Any]) -> R.KindInfo:
        """The kind of a document: known here, else found through the server's discovery."""
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        info = R.known_kind(api_version, kind)
        if info is not None:
            return info
        if api_version not in self._discovered:
            try:
                with self._errors(f"apiVersion {api_version}"):
                    served = self.client.call(lambda: self.client.kube.resources(api_version))
            except NotFoundError:  # the group/version itself is not served
                served = []
            self._discovered[api_version] = served
        return R.kind_from_discovery(api_version, kind, self._discovered[api_version])

    # --- generic reads -----------------------------------------------------------------------

    def get(self, info: R.KindInfo, name: str, namespace: str | None = None) -> dict[str, Any]:
        """One object; :class:`NotFoundError` names it when it does not exist."""
        ns = self._ns(info, namespace)
        with self._errors(_what(info, name)):
            return self.client.call(
                lambda: self.client.kube.get(info.api_version, info.plural, name, namespace=ns)
            )

    def find(
        self, info: R.KindInfo, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """Like :meth:`get` but None when absent."""
        try:
            return self.get(info, name, namespace)
        except NotFoundError:
            return None

    def objects(
        self,
        info: R.KindInfo,
        namespace: str | None = None,
        labels: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Objects of one kind, sorted by namespace then name (kubectl's order)."""
        return self.objects_at(info, namespace, labels)[0]

    def objects_at(
        self,
        info: R.KindInfo,
        namespace: str | None = None,
        labels: dict[str, Any] | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """:meth:`objects` plus the list's resourceVersion, where a watch continues from."""
        ns = self._ns(info, namespace)
        all_namespaces = ns == ALL_NAMESPACES
        with self._errors(info.plural):
            objs, rv = self.client.call(
                lambda: self.client.kube.list(
                    info.api_version,
                    info.plural,
                    namespace=None if all_namespaces else ns,
                    label_selector=_selector(labels),
                )
            )
        version: str | None = rv or None
        objs.sort(
            key=lambda o: (obj_at(o, "metadata").get("namespace") or "", o["metadata"]["name"])
        )
        return objs, version

    def watch(
        self,
        info: R.KindInfo,
        namespace: str | None = None,
        name: str | None = None,
        resource_version: str | None = None,
        labels: dict[str, Any] | None = None,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event type, object) for every change, until interrupted.

        From ``resource_version`` (a list's) only later changes come; without it the server
        first replays every existing object as ADDED. ``labels``: ``{key: value}`` (``None``: the
        key exists).
        """
        ns = self._ns(info, namespace)
        ns = None if ns == ALL_NAMESPACES else ns
        fields = f"metadata.name={name}" if name else None
        kube = self.client.kube

        def events(since: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
            return self.client.stream(
                lambda: kube.watch(
                    info.api_version,
                    info.plural,
                    namespace=ns,
                    resource_version=since,
                    field_selector=fields,
                    label_selector=_selector(labels),
                )
            )

        rv = resource_version or None
        with self._errors(info.plural):
            while True:  # the server ends a watch after a while; carry on from where it was
                for kind, obj in events(rv):
                    rv = str(obj_at(obj, "metadata").get("resourceVersion") or "") or rv
                    if kind != "BOOKMARK":
                        yield kind, obj

    # --- apply / delete ----------------------------------------------------------------------

    def apply(self, objs: Iterable[dict[str, Any]], *, force: bool = False) -> list[ApplyResult]:
        """Server-side apply each object in order; stops at the first error (kubectl does too)."""
        return [self.apply_one(obj, force=force) for obj in objs]

    def apply_one(self, obj: dict[str, Any], *, force: bool = False) -> ApplyResult:
        info = self.kind_of(obj)  # ClientError for a kind it cannot place
        # A file is desired state: what the server wrote (resourceVersion, managedFields,
        # status, ...) is dropped, so `get -o yaml` output applies again instead of being
        # refused as stale (409) or as setting fields an apply may not set.
        meta = {k: v for k, v in obj_at(obj, "metadata").items() if k not in _SERVER_META}
        ns = (meta.get("namespace") or self.namespace) if info.namespaced else None
        body = {k: v for k, v in obj.items() if k != "status"}
        body["metadata"] = {**meta, "namespace": ns} if ns else meta
        name = meta.get("name")
        if not name:
            # Server-side apply needs a name; a generateName object can only be created.
            with self._errors(info.plural):
                created = self.client.call(
                    lambda: self.client.kube.create(info.api_version, info.plural, body)
                )
            return ApplyResult(info, created["metadata"]["name"], ns, "created", created)
        before = self.find(info, name, ns)
        with self._errors(_what(info, name)):
            after = self.client.call(
                lambda: self.client.kube.apply(
                    info.plural, body, field_manager=FIELD_MANAGER, force=force
                )
            )
        if before is None:
            action: Action = "created"
        elif before["metadata"].get("resourceVersion") == after["metadata"].get("resourceVersion"):
            action = "unchanged"
        else:
            action = "configured"
        return ApplyResult(info, name, ns, action, after)

    def delete_object(self, obj: dict[str, Any]) -> R.KindInfo:
        """Delete the object a document names (``delete -f``); NotFoundError when absent."""
        info = self.kind_of(obj)
        meta = obj_at(obj, "metadata")
        name = str(meta.get("name") or "")
        if not name:
            raise ClientError(f"{info.kind} in file has no metadata.name; cannot delete it")
        if info == R.TRAINJOB:
            self.delete_job(name, namespace=meta.get("namespace"), wait=False)
            return info
        self._delete(info, name, meta.get("namespace"))
        return info

    def _delete(self, info: R.KindInfo, name: str, namespace: str | None) -> None:
        ns = self._ns(info, namespace)
        with self._errors(_what(info, name)):
            self.client.call(
                lambda: self.client.kube.delete(info.api_version, info.plural, name, namespace=ns)
            )

    def delete_job(
        self, name: str, *, namespace: str | None = None, wait: bool = True, timeout: float = 30.0
    ) -> None:
        """Delete a TrainJob; with ``wait``, return only once it and every pod of it are gone."""
        ns = namespace or self.namespace
        self._delete(R.TRAINJOB, name, ns)
        if wait:
            self.wait_deleted(name, namespace=ns, timeout=timeout)

    def wait_deleted(
        self, name: str, *, namespace: str | None = None, timeout: float = 30.0
    ) -> None:
        """Poll until the TrainJob and its pods have left the API (the executor reaps first)."""
        ns = namespace or self.namespace
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            job_left = self.find(R.TRAINJOB, name, ns) is None
            pods = self.objects(R.POD, ns, labels=pod_selector(name)) if job_left else [None]
            if job_left and not pods:
                return
            if time.monotonic() >= deadline:
                left = f"{len(pods)} pod(s)" if job_left else "the trainjob"
                raise ClientError(f'trainjob "{name}": {left} still present after {timeout:g}s')
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    # --- suspend / resume --------------------------------------------------------------------

    def set_suspend(self, name: str, suspend: bool, *, namespace: str | None = None) -> bool:
        """Merge-patch ``spec.suspend``; False when it already had that value (nothing sent)."""
        ns = namespace or self.namespace
        current = self.get(R.TRAINJOB, name, ns)
        if bool(obj_at(current, "spec").get("suspend")) == suspend:
            return False
        info = R.TRAINJOB
        with self._errors(_what(info, name)):
            self.client.call(
                lambda: self.client.kube.patch(
                    info.api_version,
                    info.plural,
                    name,
                    {"spec": {"suspend": suspend}},
                    namespace=ns,
                    patch_type="merge",
                )
            )
        return True

    # --- jobs as people see them --------------------------------------------------------------

    def pods(self, job: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Every pod of a TrainJob, oldest first."""
        pods = self.objects(R.POD, namespace, labels=pod_selector(job))
        return sorted(pods, key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))

    def _runtime_nodes(
        self, spec: dict[str, Any], ns: str, cache: dict[Any, int | None]
    ) -> int | None:
        _, kind, name = runtime_ref({"spec": spec})
        key = (kind, name, ns)
        if key not in cache:
            info = (
                R.TRAINING_RUNTIME
                if key[0] == R.TRAINING_RUNTIME.kind
                else R.CLUSTER_TRAINING_RUNTIME
            )
            runtime = self.find(info, str(key[1]), ns) if key[1] else None
            nodes = obj_at(runtime, "spec", "mlPolicy").get("numNodes")
            cache[key] = int(nodes) if isinstance(nodes, int) else None
        return cache[key]

    def view(
        self,
        obj: dict[str, Any],
        pods: list[dict[str, Any]] | None = None,
        cache: dict[Any, int | None] | None = None,
    ) -> JobView:
        """A :class:`JobView` of a TrainJob object (pods listed when not given)."""
        meta = obj_at(obj, "metadata")
        spec = obj_at(obj, "spec")
        ns = str(meta.get("namespace") or self.namespace)
        name = str(meta.get("name"))
        if pods is None:
            pods = self.pods(name, ns)
        steps = steps_from_pods(pods)
        nodes = obj_at(spec, "trainer").get("numNodes")
        num_nodes = (
            int(nodes)
            if isinstance(nodes, int)
            else self._runtime_nodes(spec, ns, {} if cache is None else cache)
        )
        _, runtime_kind, runtime_name = runtime_ref(obj)
        return JobView(
            name=name,
            namespace=ns,
            state=job_state(obj),
            runtime_kind=runtime_kind,
            runtime_name=runtime_name,
            num_nodes=num_nodes,
            created=str(meta.get("creationTimestamp") or ""),
            suspended=bool(spec.get("suspend")),
            steps=steps,
            obj=obj,
        )

    def job(self, name: str, namespace: str | None = None) -> JobView:
        """One TrainJob with its steps and state."""
        return self.view(self.get(R.TRAINJOB, name, namespace))

    def jobs(self, namespace: str | None = None) -> list[JobView]:
        """Every TrainJob of a namespace (``ALL_NAMESPACES`` for all), one pod list for all."""
        return self.jobs_from(self.objects(R.TRAINJOB, namespace), namespace)

    def jobs_from(self, objs: list[dict[str, Any]], namespace: str | None = None) -> list[JobView]:
        """Views of already fetched TrainJobs; pods are listed once for all of them."""
        if not objs:
            return []
        namespaces = {o["metadata"].get("namespace") or self.namespace for o in objs}
        where = namespace or (namespaces.pop() if len(namespaces) == 1 else ALL_NAMESPACES)
        by_job: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for pod in self.objects(R.POD, where, labels={JOBSET_NAME_LABEL: None}):
            meta = pod["metadata"]
            owner = str(obj_at(meta, "labels").get(JOBSET_NAME_LABEL))
            by_job.setdefault((meta.get("namespace") or "", owner), []).append(pod)
        cache: dict[Any, int | None] = {}
        views = []
        for obj in objs:
            meta = obj["metadata"]
            key = (meta.get("namespace") or self.namespace, meta["name"])
            views.append(self.view(obj, by_job.get(key, []), cache))
        return views

    # --- logs and events ---------------------------------------------------------------------

    def step(self, job: str, step: str = "node-0", namespace: str | None = None) -> Step:
        """The named step of a job; a clear error listing the steps that exist otherwise."""
        view = self.job(job, namespace)
        for s in view.steps:
            if s.name == step:
                return s
        have = ", ".join(s.name for s in view.steps)
        if have:
            raise NotFoundError(f'trainjob "{job}" has no step {step} (steps: {have})')
        if view.state in ("Complete", "Failed"):
            # Its pods were removed with their logs (deleted, or cleaned up after the end).
            why = f": {view.message}" if view.message else ""
            raise NotFoundError(
                f'trainjob "{job}" is {view.state}{why}; its pods and their logs are gone'
            )
        raise NotFoundError(f'trainjob "{job}" has no pods yet (state {view.state or "Created"})')

    def logs(
        self,
        pod: str,
        container: str,
        *,
        namespace: str | None = None,
        follow: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]:
        """Lines (without newlines) of one container's log; streams while ``follow``."""
        ns = namespace or self.namespace
        kube = self.client.kube
        with self._errors(f'pods "{pod}"'):
            yield from self.client.stream(
                lambda: kube.log_lines(
                    pod, namespace=ns, container=container, follow=follow, tail_lines=tail
                )
            )

    def events(self, job: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """core/v1 Events of the TrainJob, its JobSet, its Jobs and its pods, oldest first.

        Only this incarnation's: a job deleted and created again under the same name keeps its
        old Events around for a while, told apart by uid, or else by being older than the job.
        """
        ns = namespace or self.namespace
        current = self.find(R.TRAINJOB, job, ns)
        uid = obj_at(current, "metadata").get("uid")
        born = parse_time(obj_at(current, "metadata").get("creationTimestamp"))
        pod_names = {p["metadata"]["name"] for p in self.pods(job, ns)}
        events = self.objects(R.EVENT, ns)

        def ours(ev: dict[str, Any]) -> bool:
            inv = obj_at(ev, "involvedObject")
            kind, name = inv.get("kind"), str(inv.get("name") or "")
            if kind == R.TRAINJOB.kind and name == job and uid and inv.get("uid"):
                return bool(inv.get("uid") == uid)
            if kind in (R.TRAINJOB.kind, R.JOBSET.kind, "Job") and born is not None:
                when = parse_time(event_time_key(ev))
                if when is not None and when < born:
                    return False
            if kind in (R.TRAINJOB.kind, R.JOBSET.kind):
                return name == job
            if kind == "Job":
                return name.startswith(f"{job}-")
            return kind == "Pod" and name in pod_names

        return sorted(filter(ours, events), key=event_time_key)


def event_time_key(ev: dict[str, Any]) -> str:
    """Sort key: the newest of the times an Event may carry, as an ISO string."""
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        when = parse_time(ev.get(key))
        if when is not None:
            return when.isoformat()
    created = parse_time(obj_at(ev, "metadata").get("creationTimestamp"))
    return created.isoformat() if created else ""


# The longest piece of a log line handed out at once; longer lines come in several pieces.
