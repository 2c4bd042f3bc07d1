"""``kubetrain doctor`` data and the mode probe."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kubetrain.local.sandbox import ImageEnv, ImageMap, doctor_report, sandbox_mode
from kubetrain.local.sandbox.mode import probe_mode


def test_the_report_is_plain_data_that_serialises() -> None:
    report = doctor_report(ImageMap({"pytorch/pytorch:*": ImageEnv(Path("/opt/envs/torch"))}))
    data = dataclasses.asdict(report)
    json.dumps(data)
    assert data["mode"] in ("bwrap", "plain")
    assert data["images"] == {
        "pytorch/pytorch:*": "/opt/envs/torch",
        "*": str(ImageMap().default.prefix),
    }
    assert set(data["tools"]) == {"torchrun", "mpirun", "ssh", "sshd"}
    assert data["missing"] == [t for t, p in data["tools"].items() if p is None]


def test_this_machine_runs_bwrap_when_it_is_installed() -> None:
    report = sandbox_mode()
    if report.bwrap is None:
        pytest.skip("bwrap not installed here")
    assert report.mode == "bwrap", report.reason
    assert report.bwrap_version


@pytest.mark.parametrize(
    ("value", "mode", "reason"),
    [
        pytest.param("plain", "plain", "forced by KUBETRAIN_SANDBOX=plain", id="KUBETRAIN_SANDBOX=plain forces the fallback"),
    ],
)  # fmt: skip
def test_the_environment_can_force_a_mode(
    monkeypatch: pytest.MonkeyPatch, value: str, mode: str, reason: str
) -> None:
    monkeypatch.setenv("KUBETRAIN_SANDBOX", value)
    report = probe_mode()
    assert (report.mode, report.reason) == (mode, reason)


def test_without_bwrap_the_fallback_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr("kubetrain.local.sandbox.mode.os.access", lambda *_: False)
    report = probe_mode()
    assert report.mode == "plain"
    assert "bwrap not found" in report.reason


def test_the_report_names_the_network_mode_and_why() -> None:
    report = doctor_report()
    assert report.network in ("pod", "host")
    assert report.network_reason
    if report.network == "pod":
        assert not any("share the host network" in text for text in report.limitations)
    else:
        assert any("share the host network" in text for text in report.limitations)


def test_the_report_says_whether_limits_are_enforced_and_why() -> None:
    from kubetrain.local.sandbox import cgroup_probe

    report = doctor_report()
    assert report.limits_enforced == (cgroup_probe().tree is not None)
    assert report.limits_reason == cgroup_probe().reason
    unenforced = [t for t in report.limitations if "limits are not enforced" in t]
    assert bool(unenforced) != report.limits_enforced


@pytest.mark.parametrize(
    ("env", "path", "available", "reason"),
    [
        pytest.param({"KUBETRAIN_NETWORK": "host"}, None, False, "forced by KUBETRAIN_NETWORK=host", id="KUBETRAIN_NETWORK=host forces the host network"),
        pytest.param({}, "/nonexistent", False, "missing tools (apt-get install util-linux iproute2 slirp4netns iptables)", id="missing tools are named by their Debian packages"),
    ],
)  # fmt: skip
def test_the_network_probe_says_why_pods_share_the_host_network(
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    path: str | None,
    available: bool,
    reason: str,
) -> None:
    from kubetrain.local.sandbox.network import _probe

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if path is not None:
        monkeypatch.setenv("PATH", path)
    probe = _probe()
    assert (probe.available, probe.reason) == (available, reason)


def test_the_package_surface_is_pinned() -> None:
    # The executor builds on these names; changing them is a deliberate act.
    import kubetrain.local.sandbox as sandbox

    assert sorted(sandbox.__all__) == sorted([
        "ContainerEvent", "ContainerOverlay", "ContainerProcess", "EventHook", "ImageEnv",
        "ImageMap", "ModeReport", "OverlayHook", "PodResult", "PodSandbox", "SandboxContext", "SandboxDoctor", "SandboxError",
        "SandboxMode", "UNKNOWN_EXIT_CODE", "current_image_env", "doctor_report", "expand",
        "hosts_file", "image_map_from_dict", "jobset_hosts", "load_image_map",
        "loopback_address", "pod_dns_names", "resolve_env", "sandbox_mode",
        "HOST_LOOPBACK", "NetworkUnavailable", "PodNetwork", "bridge_address", "network_probe",
        "service_dns_names", "cgroup_probe",
    ])  # fmt: skip
    assert all(hasattr(sandbox, name) for name in sandbox.__all__)
