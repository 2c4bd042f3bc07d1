"""Job operations every command needs, over any Kubernetes API (local daemon or cluster).

Everything returns plain dicts or small dataclasses; every failure is a one-line
:class:`~kubetrain.client.errors.ClientError`. Custom resources are always written with an explicit
patch type: server-side apply for ``apply``, JSON merge patch for suspend/resume.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from kubetrain.api.labels import JOBSET_NAME_LABEL
from kubetrain.client import resources as R
from kubetrain.client.connection import FIELD_MANAGER, Connection
from kubetrain.client.errors import ClientError, NotFoundError, translate_errors
from kubetrain.client.state import job_state
from kubetrain.client.steps import Step, pod_selector, steps_from_pods
from kubetrain.client.view import JobView, parse_time

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
_DECODE_LOCK = threading.Lock()  # lightkube's marker for cluster-wide list/watch

Action = Literal["created", "configured", "unchanged"]


def plain(obj: Any) -> dict[str, Any]:
    """A lightkube object (generic or model) as the plain dict it was on the wire."""
    if isinstance(obj, dict) and not hasattr(obj, "to_dict"):
        return obj
    result: dict[str, Any] = obj.to_dict()
    return result


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

    @contextlib.contextmanager
    def _serial(self, what: str = "") -> Iterator[None]:
        """One request-and-decode at a time per process (streams excepted).

        msgspec, under lightkube's model decoding, can crash (SIGSEGV) when two threads decode a
        type for the first time at once; ``run`` and ``logs --all-ranks`` use threads.
        """
        with _DECODE_LOCK, translate_errors(what, self.conn.server):
            yield

    # --- generic reads -----------------------------------------------------------------------

    def get(self, info: R.KindInfo, name: str, namespace: str | None = None) -> dict[str, Any]:
        """One object; :class:`NotFoundError` names it when it does not exist."""
        res = R.resource_for(info)
        with self._serial(_what(info, name)):
            if info.namespaced:
                return plain(self.client.get(res, name, namespace=namespace or self.namespace))
            return plain(self.client.get(res, name))

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
        from lightkube import NotReadyError

        res = R.resource_for(info)
        with self._serial(info.plural):
            if info.namespaced:
                items = self.client.list(res, namespace=namespace or self.namespace, labels=labels)
            else:
                items = self.client.list(res, labels=labels)
            objs = [plain(o) for o in items]
            try:
                version: str | None = items.resourceVersion
            except NotReadyError:  # lightkube has none to give for an empty answer
                version = None
        objs.sort(
            key=lambda o: ((o.get("metadata") or {}).get("namespace") or "", o["metadata"]["name"])
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
        first replays every existing object as ADDED. ``labels`` is a lightkube selector.
        """
        res = R.resource_for(info)
        fields = {"metadata.name": name} if name else None
        rv = resource_version or None
        with self._errors(info.plural):
            if info.namespaced:
                stream = self.client.watch(
                    res,
                    namespace=namespace or self.namespace,
                    fields=fields,
                    labels=labels,
                    resource_version=rv,
                )
            else:
                stream = self.client.watch(res, fields=fields, labels=labels, resource_version=rv)
            for kind, obj in stream:
                yield kind, plain(obj)

    # --- apply / delete ----------------------------------------------------------------------

    def apply(self, objs: Iterable[dict[str, Any]], *, force: bool = False) -> list[ApplyResult]:
        """Server-side apply each object in order; stops at the first error (kubectl does too)."""
        return [self.apply_one(obj, force=force) for obj in objs]

    def apply_one(self, obj: dict[str, Any], *, force: bool = False) -> ApplyResult:
        from lightkube.types import PatchType

        info = R.info_for_object(obj)  # ClientError for a kind it cannot place
        res = R.resource_for_object(obj)
        # A file is desired state: what the server wrote (resourceVersion, managedFields,
        # status, ...) is dropped, so `get -o yaml` output applies again instead of being
        # refused as stale (409) or as setting fields an apply may not set.
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_META}
        ns = (meta.get("namespace") or self.namespace) if info.namespaced else None
        body = {k: v for k, v in obj.items() if k != "status"}
        body["metadata"] = {**meta, "namespace": ns} if ns else meta
        name = meta.get("name")
        if not name:
            # Server-side apply needs a name; a generateName object can only be created.
            with self._serial(info.plural):
                created = plain(self.client.create(res.from_dict(body), namespace=ns))
            return ApplyResult(info, created["metadata"]["name"], ns, "created", created)
        before = self.find(info, name, ns)
        with self._serial(_what(info, name)):
            after = plain(
                self.client.patch(
                    res,
                    name,
                    body,
                    namespace=ns,
                    patch_type=PatchType.APPLY,
                    field_manager=FIELD_MANAGER,
                    force=force,
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
        info = R.info_for_object(obj)
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            raise ClientError(f"{info.kind} in file has no metadata.name; cannot delete it")
        if info == R.TRAINJOB:
            self.delete_job(name, namespace=meta.get("namespace"), wait=False)
            return info
        res = R.resource_for_object(obj)
        with self._serial(_what(info, name)):
            if info.namespaced:
                self.client.delete(res, name, namespace=meta.get("namespace") or self.namespace)
            else:
                self.client.delete(res, name)
        return info

    def delete_job(
        self, name: str, *, namespace: str | None = None, wait: bool = True, timeout: float = 30.0
    ) -> None:
        """Delete a TrainJob; with ``wait``, return only once it and every pod of it are gone."""
        ns = namespace or self.namespace
        res = R.resource_for(R.TRAINJOB)
        with self._serial(_what(R.TRAINJOB, name)):
            self.client.delete(res, name, namespace=ns)
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
        from lightkube.types import PatchType

        ns = namespace or self.namespace
        current = self.get(R.TRAINJOB, name, ns)
        if bool((current.get("spec") or {}).get("suspend")) == suspend:
            return False
        with self._serial(_what(R.TRAINJOB, name)):
            self.client.patch(
                R.resource_for(R.TRAINJOB),
                name,
                {"spec": {"suspend": suspend}},
                namespace=ns,
                patch_type=PatchType.MERGE,
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
        ref = spec.get("runtimeRef") or {}
        key = (ref.get("kind") or R.CLUSTER_TRAINING_RUNTIME.kind, ref.get("name"), ns)
        if key not in cache:
            info = (
                R.TRAINING_RUNTIME
                if key[0] == R.TRAINING_RUNTIME.kind
                else R.CLUSTER_TRAINING_RUNTIME
            )
            runtime = self.find(info, str(key[1]), ns) if key[1] else None
            nodes = ((runtime or {}).get("spec") or {}).get("mlPolicy", {}).get("numNodes")
            cache[key] = int(nodes) if isinstance(nodes, int) else None
        return cache[key]

    def view(
        self,
        obj: dict[str, Any],
        pods: list[dict[str, Any]] | None = None,
        cache: dict[Any, int | None] | None = None,
    ) -> JobView:
        """A :class:`JobView` of a TrainJob object (pods listed when not given)."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        ns = str(meta.get("namespace") or self.namespace)
        name = str(meta.get("name"))
        if pods is None:
            pods = self.pods(name, ns)
        steps = steps_from_pods(pods)
        nodes = (spec.get("trainer") or {}).get("numNodes")
        num_nodes = (
            int(nodes) if isinstance(nodes, int) else self._runtime_nodes(spec, ns, cache or {})
        )
        ref = spec.get("runtimeRef") or {}
        return JobView(
            name=name,
            namespace=ns,
            state=job_state(obj),
            runtime_kind=str(ref.get("kind") or R.CLUSTER_TRAINING_RUNTIME.kind),
            runtime_name=str(ref.get("name") or ""),
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
            owner = str((meta.get("labels") or {}).get(JOBSET_NAME_LABEL))
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
        have = ", ".join(s.name for s in view.steps) or "none yet"
        raise NotFoundError(f'trainjob "{job}" has no step {step} (steps: {have})')

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
        with self._errors(f'pods "{pod}"'):
            stream = self.client.log(
                pod,
                namespace=namespace or self.namespace,
                container=container,
                follow=follow,
                tail_lines=tail,
                newlines=False,
            )
            yield from stream

    def events(self, job: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """core/v1 Events of the TrainJob, its JobSet, its Jobs and its pods, oldest first.

        Only this incarnation's: a job deleted and created again under the same name keeps its
        old Events around for a while, told apart by uid, or else by being older than the job.
        """
        ns = namespace or self.namespace
        current = self.find(R.TRAINJOB, job, ns)
        uid = ((current or {}).get("metadata") or {}).get("uid")
        born = parse_time(((current or {}).get("metadata") or {}).get("creationTimestamp"))
        pod_names = {p["metadata"]["name"] for p in self.pods(job, ns)}
        res = R.resource_for(R.EVENT)
        with self._serial("events"):
            events = [plain(e) for e in self.client.list(res, namespace=ns)]

        def ours(ev: dict[str, Any]) -> bool:
            inv = ev.get("involvedObject") or {}
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
    created = parse_time((ev.get("metadata") or {}).get("creationTimestamp"))
    return created.isoformat() if created else ""
