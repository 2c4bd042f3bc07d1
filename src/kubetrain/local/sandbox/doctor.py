"""What ``kubetrain doctor`` says about running pods here, as plain data for the CLI."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from .cgroups import cgroup_probe
from .context import ImageMap
from .mode import sandbox_mode, userns_status
from .network import network_probe

__all__ = ["SandboxDoctor", "doctor_report"]

# Tools the default runtimes' commands call; torchrun comes from the image's environment.
_TOOLS = ("torchrun", "mpirun", "ssh", "sshd")


@dataclass(frozen=True)
class SandboxDoctor:
    mode: str
    reason: str
    bwrap: str | None
    bwrap_version: str | None
    user_namespaces: bool
    user_namespaces_detail: str
    running_as_root: bool
    images: dict[str, str]  # image pattern (or "*" for the default) → environment prefix
    tools: dict[str, str | None]  # tool → path, None when missing
    missing: list[str] = field(default_factory=list)
    # "pod": each pod its own network namespace and IP; "host": pods share the host's network.
    network: str = "host"
    network_reason: str = ""
    network_missing: list[str] = field(default_factory=list)  # Debian packages
    # Whether containers' resources.limits (memory, cpu) are enforced with cgroups, and how.
    limits_enforced: bool = False
    limits_reason: str = ""
    limitations: list[str] = field(default_factory=list)


def doctor_report(images: ImageMap | None = None) -> SandboxDoctor:
    images = images or ImageMap()
    report = sandbox_mode()
    userns, userns_detail = userns_status()
    mapping = {pattern: str(env.prefix) for pattern, env in images.images.items()}
    mapping["*"] = str(images.default.prefix)
    path = images.default.path()
    tools = {t: shutil.which(t, path=path) for t in _TOOLS}
    missing = [t for t, where in tools.items() if where is None]
    limitations = []
    if report.mode == "plain":
        limitations += [
            "pods share the host's hostname; peers' DNS names do not resolve, so env values "
            "naming a peer pod are rewritten to its loopback address (names inside scripts are not)",
            "volumes are not mounted at their mountPath: paths below one (and below /tmp) in "
            "command, args and env are rewritten to the volume's (the pod's) host directory; "
            "paths built inside programs are not",
            "no PID, UTS or mount namespace: processes see the host's; a subreaper still "
            "reaps and kills whatever a container leaves behind",
            "runAsUser is ignored: containers run as the daemon's user",
            "no protection from the pods: a pod reads whatever the daemon's user can, "
            "KUBETRAIN_HOME included (the API server's admin token, signing keys, the "
            "database with every Secret) and other pods' volumes and tokens; run only "
            "code you trust, or install bubblewrap",
        ]
    net = network_probe()
    network = "pod" if net.available and report.mode == "bwrap" else "host"
    net_reason = net.reason if report.mode == "bwrap" else "pods run as plain processes"
    if network == "host":
        limitations.append(
            "pods share the host network namespace: a JobSet waits while another holds a "
            "port its pods declare (two torch jobs' rendezvous on 29500 run one after the other)"
        )
    cgroups = cgroup_probe()
    if cgroups.tree is None:
        limitations.append(
            f"resources.limits are not enforced ({cgroups.reason}): a container may use "
            "more memory and cpu than its limits, and is never OOMKilled"
        )
    return SandboxDoctor(
        mode=report.mode, reason=report.reason, bwrap=report.bwrap,
        bwrap_version=report.bwrap_version, user_namespaces=userns,
        user_namespaces_detail=userns_detail, running_as_root=os.geteuid() == 0,
        images=mapping, tools=tools, missing=missing, network=network,
        network_reason=net_reason, network_missing=list(net.missing), limits_enforced=cgroups.tree is not None,
        limits_reason=cgroups.reason, limitations=limitations,
    )  # fmt: skip
