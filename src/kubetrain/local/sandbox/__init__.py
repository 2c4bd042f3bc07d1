"""Run one Pod as sandboxed local processes: the kubelet half of the local executor.

Usage (inside an asyncio task)::

    hosts = jobset_hosts([("tj-node-0-0", "tj", "default", "127.0.0.2"),
                          ("tj-node-0-1", "tj", "default", "127.0.0.3")])
    ctx = SandboxContext(pod_dir=home / "pods" / uid, log_dir=home / "logs",
                         pod_ip="127.0.0.2", hosts=hosts, claims_dir=home / "claims",
                         config_maps={...}, secrets={...}, tokens={audience: token})
    sandbox = PodSandbox(pod, ctx)                 # pod: a Pod dict, Kubernetes JSON shape
    result = await sandbox.run(on_event=hook)      # PodResult: per-container exit codes
    await sandbox.terminate(grace=5)               # from another task: SIGTERM, then SIGKILL

Design choices worth knowing:

- One bwrap per container, each the leader of its own session, never started with
  ``--die-with-parent`` by default: a pod must survive its daemon so a restarted daemon can
  `PodSandbox.adopt` it from the JSON state in ``<pod_dir>/state`` (pid, pgid, start time).
  bwrap writes the exit code to a status file itself (``--json-status-fd``), so even a pod
  that ended while no daemon ran reports its real code. ``SandboxContext(die_with_parent=True)``
  trades that away for pods that must die with their parent (a one-shot foreground run).
- Termination signals the workload, not the wrappers (bwrap would die at once and lose the
  exit code), then SIGKILLs the whole tree and group; in bwrap the PID namespace guarantees
  that nothing survives, in plain mode a child subreaper (`reaper`) keeps every leftover
  below the container's root so it can be killed.
- Where bwrap cannot run, pods run as plain processes (`sandbox_mode` says which and why;
  ``KUBETRAIN_SANDBOX=plain|bwrap`` forces a mode). Plain mode keeps the env, logs, exit codes
  and termination, but has no own hostname, /etc/hosts or mount points: env values naming a
  peer pod are rewritten to its address, and mount paths (and /tmp) in command/args/env to
  the volume's (the pod's) host directory; names and paths built inside programs are not.
- With the pod network (`network.PodNetwork`, when user/network namespaces and a bridge are
  available) each pod has its own network namespace and IP, so any port can be bound; without
  it pods share the host network namespace: each binds its own 127.x address, but a server
  listening on all interfaces (torch's TCPStore on 29500) collides with another job's.
"""

from __future__ import annotations

from .cgroups import cgroup_probe
from .context import (
    ContainerOverlay,
    ImageEnv,
    ImageMap,
    OverlayHook,
    SandboxContext,
    SandboxMode,
    current_image_env,
)
from .doctor import SandboxDoctor, doctor_report
from .envvars import expand, resolve_env
from .errors import SandboxError
from .hosts import (
    hosts_file,
    jobset_hosts,
    loopback_address,
    pod_dns_names,
    service_dns_names,
)
from .images import image_map_from_dict, load_image_map
from .mode import ModeReport, sandbox_mode
from .network import HOST_LOOPBACK, NetworkUnavailable, PodNetwork, bridge_address, network_probe
from .pod import ContainerEvent, EventHook, PodResult, PodSandbox
from .process import UNKNOWN_EXIT_CODE, ContainerProcess

__all__ = [
    "HOST_LOOPBACK",
    "UNKNOWN_EXIT_CODE",
    "ContainerEvent",
    "ContainerOverlay",
    "ContainerProcess",
    "EventHook",
    "ImageEnv",
    "ImageMap",
    "ModeReport",
    "NetworkUnavailable",
    "OverlayHook",
    "PodNetwork",
    "PodResult",
    "PodSandbox",
    "SandboxContext",
    "SandboxDoctor",
    "SandboxError",
    "SandboxMode",
    "bridge_address",
    "cgroup_probe",
    "current_image_env",
    "doctor_report",
    "expand",
    "hosts_file",
    "image_map_from_dict",
    "jobset_hosts",
    "load_image_map",
    "loopback_address",
    "network_probe",
    "pod_dns_names",
    "resolve_env",
    "sandbox_mode",
    "service_dns_names",
]
