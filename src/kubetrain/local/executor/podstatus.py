"""Pod status as a kubelet reports it, built from what the local containers did.

`PodStatusModel` holds one record per container and turns it into the ``status`` of a Pod:
phase, conditions, ``containerStatuses`` with ``state``/``lastState``/``restartCount``, the
pod's own loopback address as ``podIP``. Pure: the caller passes every timestamp.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.access import dicts, obj_at
from kubetrain.local.sandbox.probes import Probe

__all__ = [
    "UNKNOWN_MESSAGE",
    "UNKNOWN_REASON",
    "ContainerRecord",
    "PodStatusModel",
]

# What the kubelet reports for a container whose end it never saw.
UNKNOWN_REASON = "ContainerStatusUnknown"
UNKNOWN_MESSAGE = "The container could not be located when the pod was terminated"


@dataclass
class ContainerRecord:
    name: str
    image: str
    init: bool = False
    restart_count: int = 0
    state: dict[str, Any] = field(
        default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}}
    )
    last_state: dict[str, Any] = field(default_factory=dict)
    container_id: str = ""
    # Its readiness probe's verdict; None for a container without one (ready while running).
    probed_ready: bool | None = None
    # Whether its startup probe has passed; None for a container without one (started while
    # running). Until it passes, the container is neither started nor ready.
    probed_started: bool | None = None

    @property
    def running(self) -> bool:
        return "running" in self.state

    @property
    def started(self) -> bool:
        return self.running and self.probed_started is not False

    @property
    def ready(self) -> bool:
        return self.started and self.probed_ready is not False

    @property
    def terminated(self) -> dict[str, Any] | None:
        t = self.state.get("terminated")
        return t if isinstance(t, dict) else None

    def as_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "image": self.image,
            "imageID": "",
            "ready": self.ready,
            "started": self.started,
            "restartCount": self.restart_count,
            "state": copy.deepcopy(self.state),
            "lastState": copy.deepcopy(self.last_state),
        }
        if self.container_id:
            out["containerID"] = self.container_id
        return out


class PodStatusModel:
    """The kubelet's view of one pod on this node."""

    def __init__(self, pod: dict[str, Any], *, pod_ip: str, host_ip: str, now: str) -> None:
        spec = obj_at(pod, "spec")
        self.restart_policy = str(spec.get("restartPolicy") or "Always")
        self.pod_ip = pod_ip
        self.host_ip = host_ip
        self.start_time = str(obj_at(pod, "status").get("startTime") or now)
        self.scheduled_at = now
        self.init = [
            ContainerRecord(str(c["name"]), str(c.get("image", "")), True)
            for c in dicts(spec.get("initContainers"))
        ]
        self.containers = [
            ContainerRecord(
                str(c["name"]),
                str(c.get("image", "")),
                # Held back only by a probe that runs here (`Probe.of`: not a grpc one).
                probed_ready=False if Probe.of(c, "readinessProbe") else None,
                probed_started=False if Probe.of(c, "startupProbe") else None,
            )
            for c in dicts(spec.get("containers"))
        ]
        for rec in self.init:
            rec.state = (
                {"waiting": {"reason": "PodInitializing"}} if rec is not self.init[0] else rec.state
            )
        if self.init:
            for rec in self.containers:
                rec.state = {"waiting": {"reason": "PodInitializing"}}
        self.phase_override: str | None = None
        self.message: str | None = None
        self.reason: str | None = None
        self._transitions: dict[str, tuple[str, str]] = {}

    def record(self, name: str) -> ContainerRecord:
        for rec in [*self.init, *self.containers]:
            if rec.name == name:
                return rec
        raise KeyError(name)

    def resume(self, status: dict[str, Any]) -> None:
        """Take over the records a previous daemon published (after a restart)."""
        self.start_time = str(status.get("startTime") or self.start_time)
        for key, records in (
            ("initContainerStatuses", self.init),
            ("containerStatuses", self.containers),
        ):
            for cs in dicts(status.get(key)):
                rec = next((r for r in records if r.name == cs.get("name")), None)
                if rec is None:
                    continue
                rec.restart_count = int(cs.get("restartCount") or 0)
                rec.state = copy.deepcopy(obj_at(cs, "state") or rec.state)
                rec.last_state = copy.deepcopy(obj_at(cs, "lastState"))
                rec.container_id = str(cs.get("containerID") or "")
        for cond in dicts(status.get("conditions")):
            if cond.get("type") and cond.get("lastTransitionTime"):
                self._transitions[str(cond["type"])] = (
                    str(cond.get("status")),
                    str(cond["lastTransitionTime"]),
                )

    # --- what happened --------------------------------------------------------------------
    def started(self, name: str, restart_count: int, now: str, container_id: str = "") -> None:
        rec = self.record(name)
        if rec.terminated is not None and restart_count > rec.restart_count:
            rec.last_state = {"terminated": rec.terminated}
        rec.restart_count = restart_count
        rec.state = {"running": {"startedAt": now}}
        rec.container_id = container_id
        # A fresh start is neither started nor ready until its probes say so.
        if rec.probed_ready is not None:
            rec.probed_ready = False
        if rec.probed_started is not None:
            rec.probed_started = False

    def probed(self, name: str, ready: bool) -> None:
        """The readiness probe's verdict for container ``name``."""
        self.record(name).probed_ready = ready

    def startup_passed(self, name: str) -> None:
        """Container ``name``'s startup probe has passed (it is not run again until a restart);
        nothing for a container without one."""
        rec = self.record(name)
        if rec.probed_started is not None:
            rec.probed_started = True

    def exited(
        self,
        name: str,
        exit_code: int,
        now: str,
        *,
        known: bool = True,
        message: str = "",
        reason: str | None = None,
    ) -> None:
        """``message``: the container's termination message; ``reason``: what the runtime says
        beyond the code (``OOMKilled``)."""
        rec = self.record(name)
        started_at = str(obj_at(rec.state, "running").get("startedAt") or now)
        term: dict[str, Any] = {
            "exitCode": exit_code,
            "reason": reason or ("Completed" if exit_code == 0 else "Error"),
            "startedAt": started_at,
            "finishedAt": now,
        }
        if message:
            term["message"] = message
        if not known:
            term.update(reason=UNKNOWN_REASON, message=UNKNOWN_MESSAGE)
        if rec.container_id:
            term["containerID"] = rec.container_id
        rec.state = {"terminated": term}

    def back_off(self, name: str, pod_name: str) -> None:
        """Waiting to restart a failed container (restartPolicy OnFailure/Always)."""
        rec = self.record(name)
        if rec.terminated is not None:
            rec.last_state = {"terminated": rec.terminated}
        rec.state = {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off restarting failed container={name} pod={pod_name}",
            }
        }

    def waiting(self, name: str, reason: str, message: str) -> None:
        self.record(name).state = {"waiting": {"reason": reason, "message": message}}

    def any_failed(self) -> bool:
        """Some container's last run ended with a non-zero exit code."""
        return any(
            (t := r.terminated) is not None and t.get("exitCode") != 0
            for r in [*self.init, *self.containers]
        )

    def failure_message(self) -> str:
        """The termination message of the first failed container (init containers first)."""
        for rec in [*self.init, *self.containers]:
            t = rec.terminated
            if t is not None and t.get("exitCode") != 0 and t.get("message"):
                return str(t["message"])
        return ""

    def fail(self, reason: str, message: str) -> None:
        """The pod ends Failed without its containers telling (start errors, lost containers)."""
        self.phase_override = "Failed"
        self.reason, self.message = reason, message

    # --- the status ---------------------------------------------------------------------------
    def phase(self) -> str:
        if self.phase_override:
            return self.phase_override
        terms = [r.terminated for r in self.containers]
        if self.containers and all(t is not None for t in terms):
            codes = [int(t["exitCode"]) for t in terms if t is not None]
            failed_init = any(r.terminated and r.terminated["exitCode"] != 0 for r in self.init)
            if all(c == 0 for c in codes) and not failed_init:
                return "Succeeded" if self.restart_policy != "Always" else "Running"
            if self.restart_policy == "Never":
                return "Failed"
        if (
            any(r.terminated and r.terminated["exitCode"] != 0 for r in self.init)
            and self.restart_policy == "Never"
        ):
            return "Failed"
        if any(r.running or r.restart_count > 0 or r.terminated for r in self.containers):
            return "Running"
        return "Pending"

    def _cond(self, ctype: str, ok: bool, now: str, reason: str | None = None) -> dict[str, Any]:
        status = "True" if ok else "False"
        prev = self._transitions.get(ctype)
        if prev is None or prev[0] != status:
            self._transitions[ctype] = (status, now)
        out: dict[str, Any] = {
            "type": ctype,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": self._transitions[ctype][1],
        }
        if reason and not ok:
            out["reason"] = reason
        return out

    def status(self, now: str) -> dict[str, Any]:
        phase = self.phase()
        initialized = all(
            r.terminated is not None and r.terminated["exitCode"] == 0 for r in self.init
        )
        ready = phase == "Running" and all(r.ready for r in self.containers)
        not_ready_reason = (
            "PodCompleted" if phase in ("Succeeded", "Failed") else "ContainersNotReady"
        )
        conditions = [
            self._cond("PodReadyToStartContainers", True, now),
            self._cond("Initialized", initialized, now, "ContainersNotInitialized"),
            self._cond("Ready", ready, now, not_ready_reason),
            self._cond("ContainersReady", ready, now, not_ready_reason),
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": self.scheduled_at,
            },
        ]
        out: dict[str, Any] = {
            "phase": phase,
            "conditions": conditions,
            "hostIP": self.host_ip,
            "hostIPs": [{"ip": self.host_ip}],
            "podIP": self.pod_ip,
            "podIPs": [{"ip": self.pod_ip}],
            "startTime": self.start_time,
            "containerStatuses": [r.as_status() for r in self.containers],
            "qosClass": "BestEffort",
        }
        if self.init:
            out["initContainerStatuses"] = [r.as_status() for r in self.init]
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        return out
