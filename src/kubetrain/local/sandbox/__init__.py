"""Run one Pod as sandboxed local processes: the kubelet half of the local executor.

Usage (inside an asyncio task)::

    ctx = SandboxContext(pod_dir=home / "pods" / uid, log_dir=home / "logs",
                         pod_ip="127.0.0.2", hosts={"tj-node-0-0.tj": "127.0.0.2", ...},
                         config_maps={...}, secrets={...})
    sandbox = PodSandbox(pod, ctx)
    result = await sandbox.run(on_event=print)     # or: await sandbox.terminate(grace=5)
    result.containers  # {"node": 0}

The rest of the package is internal; `sandbox_mode` and `doctor_report` feed
``kubetrain doctor``.
"""

from __future__ import annotations

from .context import ImageEnv, ImageMap, SandboxContext, SandboxMode, current_image_env
from .doctor import SandboxDoctor, doctor_report
from .envvars import expand, resolve_env
from .errors import SandboxError
from .hosts import hosts_file, jobset_hosts, loopback_address, pod_dns_names
from .images import image_map_from_dict, load_image_map
from .mode import ModeReport, sandbox_mode
from .pod import ContainerEvent, EventHook, PodResult, PodSandbox
from .process import UNKNOWN_EXIT_CODE, ContainerProcess

__all__ = [
    "UNKNOWN_EXIT_CODE",
    "ContainerEvent",
    "ContainerProcess",
    "EventHook",
    "ImageEnv",
    "ImageMap",
    "ModeReport",
    "PodResult",
    "PodSandbox",
    "SandboxContext",
    "SandboxDoctor",
    "SandboxError",
    "SandboxMode",
    "current_image_env",
    "doctor_report",
    "expand",
    "hosts_file",
    "image_map_from_dict",
    "jobset_hosts",
    "load_image_map",
    "loopback_address",
    "pod_dns_names",
    "resolve_env",
    "sandbox_mode",
]
