"""The pod network: every pod its own network namespace and IP on a bridge the engine owns.

Built the way rootless container engines build it, without touching the host's interfaces,
routes or firewall:

- a *holder* process (``unshare --user --map-root-user --net``; no user namespace when the
  daemon is root) owns a network namespace with the bridge ``kt0`` (10.88.0.1/16) in it;
- ``slirp4netns`` gives the holder a ``tap0`` with a default route through user-mode NAT, so
  pods reach the internet and, at ``10.0.2.2``, the host's loopback (the API server and the
  status server listen there); the holder masquerades the pod subnet out of ``tap0``;
- each pod gets a *pause* process in a network namespace of its own, created inside the
  holder's user namespace, with a veth pair: ``eth0`` in the pod, the peer on the bridge;
- containers run as ``nsenter -t <pause> [-U] -n -- bwrap ...``: bwrap keeps doing the
  mount, PID and UTS namespaces; the network is the pod's.

Everything lives in processes: when the holder and the pause processes die, the kernel removes
the namespaces, veths and bridge with them. Pids are written under the engine's home so a
restarted daemon adopts the network its running pods still use.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import os
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .procfs import proc_info

__all__ = [
    "BRIDGE",
    "GATEWAY",
    "HOST_LOOPBACK",
    "NetworkProbe",
    "NetworkUnavailable",
    "PodNetwork",
    "bridge_address",
    "network_probe",
]

SUBNET = ipaddress.IPv4Network("10.88.0.0/16")
GATEWAY = "10.88.0.1"
BRIDGE = "kt0"
# The gateway's own MAC (locally administered). A bridge left to itself takes the lowest MAC of
# its ports and changes it when that port's pod goes: every other pod would then send to a MAC
# that is gone until its ARP entry for the gateway expired (half a minute without egress).
BRIDGE_MAC = "02:6b:74:00:00:01"
# slirp4netns's fixed addresses: the holder's tap0 is 10.0.2.100, the host's loopback 10.0.2.2.
HOST_LOOPBACK = "10.0.2.2"
_MTU = 65520
_TOOLS = {"unshare": "util-linux", "nsenter": "util-linux", "ip": "iproute2",
          "slirp4netns": "slirp4netns", "iptables": "iptables"}  # fmt: skip
_STATE = "network.json"
_POD_STATE = "netns.json"


class NetworkUnavailable(Exception):
    """The pod network cannot be set up here; the message says what is missing."""


# slirp4netns's DNS forwarder: it asks the host's resolvers, loopback ones included.
SLIRP_DNS = "10.0.2.3"


def pod_resolv_conf(host: str = "/etc/resolv.conf") -> str:
    """The host's resolv.conf for a pod on the pod network: nameservers on the host's
    loopback (systemd-resolved's 127.0.0.53) are out of a pod's reach, so slirp4netns's
    forwarder stands in for them."""
    try:
        text = Path(host).read_text()
    except OSError:
        text = ""
    lines, forwarded = [], False
    for line in text.splitlines():
        words = line.split()
        if (
            len(words) >= 2
            and words[0] == "nameserver"
            and (words[1].startswith("127.") or words[1] == "::1")
        ):
            if not forwarded:
                lines.append(f"nameserver {SLIRP_DNS}")
                forwarded = True
            continue
        lines.append(line)
    if not any(line.split()[:1] == ["nameserver"] for line in lines):
        lines.append(f"nameserver {SLIRP_DNS}")
    return "\n".join(lines) + "\n"


def bridge_address(index: int) -> str:
    """The ``index``-th pod address on the bridge: 10.88.0.2, 10.88.0.3, … (.0/.255 skipped)."""
    if index < 0:
        raise ValueError("index must be >= 0")
    block, offset = divmod(index + 1, 254)
    if block >= 256:
        raise ValueError("out of pod addresses")
    return f"10.88.{block}.{offset + 1}"


def _userns() -> bool:
    """Whether the holder needs a user namespace (it does unless the daemon is root)."""
    return os.geteuid() != 0


def _enter(pid: int, *, user: bool, net: bool = True) -> list[str]:
    argv = ["nsenter", "-t", str(pid)]
    if user:
        argv += ["-U", "--preserve-credentials"]
    if net:
        argv.append("-n")
    return [*argv, "--"]


def _run(argv: list[str], what: str, stdin: str | None = None) -> None:
    try:
        out = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise NetworkUnavailable(f"{what}: {err}") from err
    if out.returncode != 0:
        detail = (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]
        raise NetworkUnavailable(f"{what}: {detail}")


def _netns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _wait_new_netns(pid: int, old: set[str | None], what: str) -> None:
    """Wait until ``pid`` is in a namespace none of ``old`` and has become ``sleep``; bounded.

    The new namespace alone is not enough: ``unshare --user --map-root-user`` writes the user
    namespace's uid and gid maps after it unshares, so entering before it execs ``sleep`` can
    find no mapping and no right to configure the network (seen under load)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ns = _netns(pid)
        if ns is None:
            raise NetworkUnavailable(f"{what}: the process exited early")
        if ns not in old and _command(pid) == "sleep":
            return
        time.sleep(0.002)
    raise NetworkUnavailable(f"{what}: no network namespace after 10 s")


def _command(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _spawn(argv: list[str]) -> int:
    """Start a long-lived helper in its own session (a terminal's Ctrl-C never reaches the
    network, as it never reaches pods); its pid. `_Proc.kill` reaps it."""
    path = shutil.which(argv[0])
    if path is None:
        raise NetworkUnavailable(f"{argv[0]} not found")
    null = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    try:
        return os.posix_spawn(path, argv, os.environ, file_actions=null, setsid=True)
    except OSError as err:
        raise NetworkUnavailable(f"cannot start {argv[0]}: {err}") from err


@dataclass(frozen=True)
class _Proc:
    pid: int
    start_time: int

    @classmethod
    def of(cls, pid: int) -> _Proc:
        info = proc_info(pid)
        return cls(pid, info.start_time if info else 0)

    def alive(self) -> bool:
        info = proc_info(self.pid)
        return info is not None and info.start_time == self.start_time and info.state not in "ZX"

    def kill(self) -> None:
        if self.alive():
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        # Ours to reap when this process started it (not when adopted from a previous daemon).
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(self.pid, 0)


@dataclass(frozen=True)
class NetworkProbe:
    """Whether this machine can give pods their own network, and why not."""

    available: bool
    reason: str
    missing: tuple[str, ...] = ()  # Debian packages to install


class PodNetwork:
    """The holder, its egress, and one pause process per pod. Blocking: call off the loop."""

    def __init__(self, state_dir: Path, holder: _Proc, slirp: _Proc, user: bool) -> None:
        self.state_dir = state_dir
        self.holder = holder
        self.slirp = slirp
        self.user = user

    # -- the holder -----------------------------------------------------------------------
    @classmethod
    def open(cls, state_dir: Path) -> PodNetwork:
        """The network of ``state_dir``: the one a previous daemon left if it still runs,
        else a new one. Raises `NetworkUnavailable`."""
        state_dir.mkdir(parents=True, exist_ok=True)
        found = cls._adopt(state_dir)
        if found is not None:
            return found
        probe = network_probe()
        if not probe.available:
            raise NetworkUnavailable(probe.reason)
        user = _userns()
        unshare = ["unshare", "--net"]
        if user:
            unshare[1:1] = ["--user", "--map-root-user"]
        holder = _Proc.of(_spawn([*unshare, "sleep", "infinity"]))
        slirp: _Proc | None = None
        try:
            _wait_new_netns(holder.pid, {_netns(os.getpid())}, "network holder")
            enter = _enter(holder.pid, user=user)
            _run([*enter, "ip", "-batch", "-"], "bridge", (
                "link set lo up\n"
                f"link add {BRIDGE} address {BRIDGE_MAC} type bridge\n"
                f"link set {BRIDGE} mtu {_MTU}\n"
                f"addr add {GATEWAY}/{SUBNET.prefixlen} dev {BRIDGE}\n"
                f"link set {BRIDGE} up\n"
            ))  # fmt: skip
            slirp = cls._start_slirp(holder.pid)
            # Pods route through the holder, which NATs them out of tap0.
            _run([*enter, "sh", "-c",
                  "echo 1 > /proc/sys/net/ipv4/ip_forward && "
                  f"iptables -t nat -A POSTROUTING -s {SUBNET} ! -d {SUBNET} -j MASQUERADE"],
                 "egress NAT")  # fmt: skip
        except BaseException:
            if slirp is not None:
                slirp.kill()
            holder.kill()
            raise
        net = cls(state_dir, holder, slirp, user)
        net._save()
        return net

    @staticmethod
    def _start_slirp(holder: int) -> _Proc:
        read_fd, write_fd = os.pipe()
        try:
            os.set_inheritable(write_fd, True)
            pid = _spawn(["slirp4netns", "--configure", f"--mtu={_MTU}",
                          f"--ready-fd={write_fd}", str(holder), "tap0"])  # fmt: skip
            slirp = _Proc.of(pid)
            os.close(write_fd)
            write_fd = -1
            # slirp4netns writes "1" once tap0 is configured, or closes the pipe on failure.
            readable, _, _ = select.select([read_fd], [], [], 10)
            ready = os.read(read_fd, 1) if readable else b""
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
        if ready != b"1":
            slirp.kill()
            raise NetworkUnavailable("slirp4netns did not start (egress to the host)")
        return slirp

    @classmethod
    def _adopt(cls, state_dir: Path) -> PodNetwork | None:
        try:
            raw = json.loads((state_dir / _STATE).read_text())
            holder = _Proc(int(raw["holder"][0]), int(raw["holder"][1]))
            slirp = _Proc(int(raw["slirp"][0]), int(raw["slirp"][1]))
            user = bool(raw["user"])
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None
        if holder.alive() and slirp.alive():
            return cls(state_dir, holder, slirp, user)
        slirp.kill()
        holder.kill()
        return None

    def _save(self) -> None:
        data = {"holder": [self.holder.pid, self.holder.start_time],
                "slirp": [self.slirp.pid, self.slirp.start_time], "user": self.user}  # fmt: skip
        tmp = self.state_dir / (_STATE + ".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.state_dir / _STATE)

    def close(self) -> None:
        """Take the whole network down (the kernel removes the bridge and every veth)."""
        self.slirp.kill()
        self.holder.kill()
        with contextlib.suppress(OSError):
            (self.state_dir / _STATE).unlink()

    def alive(self) -> bool:
        return self.holder.alive()

    # -- pods -----------------------------------------------------------------------------
    def attach(self, pod_dir: Path, ip: str) -> int:
        """Give the pod of ``pod_dir`` its namespace with ``ip`` on the bridge; the pause pid.

        A pod that already has a live pause process (adopted after a daemon restart) keeps it.
        """
        pause = self.pause_of(pod_dir)
        if pause is not None:
            return pause
        pid = _spawn([*_enter(self.holder.pid, user=self.user), "unshare", "--net",
                      "sleep", "infinity"])  # fmt: skip
        pause_proc = _Proc.of(pid)
        try:
            _wait_new_netns(
                pid, {_netns(os.getpid()), _netns(self.holder.pid)}, "pod network namespace"
            )
            octets = ip.split(".")
            veth = f"kv{octets[2]}x{octets[3]}"
            # The host side of the veth goes onto the bridge; eth0 goes into the pod. The pair
            # is made whole in the pod's namespace, so it can never outlive it half-made.
            enter = _enter(self.holder.pid, user=self.user)
            _run([*enter, "ip", "-batch", "-"], "pod veth", (
                f"link add {veth} mtu {_MTU} type veth peer name eth0 mtu {_MTU} netns {pid}\n"
                f"link set {veth} master {BRIDGE} up\n"
            ))  # fmt: skip
            _run([*enter, "nsenter", "-t", str(pid), "-n", "--", "ip", "-batch", "-"],
                 "pod address", (
                "link set lo up\n"
                f"addr add {ip}/{SUBNET.prefixlen} dev eth0\n"
                "link set eth0 up\n"
                f"route add default via {GATEWAY}\n"
            ))  # fmt: skip
        except BaseException:
            pause_proc.kill()
            raise
        pod_dir.mkdir(parents=True, exist_ok=True)
        (pod_dir / _POD_STATE).write_text(
            json.dumps({"pause": [pause_proc.pid, pause_proc.start_time], "ip": ip})
        )
        return pid

    @staticmethod
    def pause_of(pod_dir: Path) -> int | None:
        """The pod's live pause pid, if it has one."""
        try:
            raw = json.loads((pod_dir / _POD_STATE).read_text())
            pause = _Proc(int(raw["pause"][0]), int(raw["pause"][1]))
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None
        return pause.pid if pause.alive() else None

    @staticmethod
    def detach(pod_dir: Path) -> None:
        """End the pod's namespace (its containers are gone): its veth goes with it."""
        try:
            raw = json.loads((pod_dir / _POD_STATE).read_text())
            pause = _Proc(int(raw["pause"][0]), int(raw["pause"][1]))
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return
        pause.kill()
        with contextlib.suppress(OSError):
            (pod_dir / _POD_STATE).unlink()

    def enter_pod(self, pause: int) -> list[str]:
        """The argv prefix that runs a command in the pod's network namespace."""
        return _enter(pause, user=self.user)


def _probe() -> NetworkProbe:
    if os.environ.get("KUBETRAIN_NETWORK", "").strip().lower() == "host":
        return NetworkProbe(False, "forced by KUBETRAIN_NETWORK=host")
    missing = tuple(dict.fromkeys(pkg for tool, pkg in _TOOLS.items() if not shutil.which(tool)))
    if missing:
        return NetworkProbe(False, f"missing tools (apt-get install {' '.join(missing)})", missing)
    # A user + network namespace with a bridge in it, the whole mechanism in one short try.
    unshare = ["unshare", "--net"] + (["--user", "--map-root-user"] if _userns() else [])
    argv = [*unshare, "ip", "link", "add", "ktprobe", "type", "bridge"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as err:
        return NetworkProbe(False, f"cannot create a network namespace: {err}")
    if out.returncode != 0:
        detail = (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]
        return NetworkProbe(
            False, f"cannot create a user/network namespace with a bridge: {detail}"
        )
    who = "root" if not _userns() else "a user namespace (rootless)"
    return NetworkProbe(True, f"own network namespace per pod on bridge {BRIDGE} ({SUBNET}), "
                        f"held in {who}; egress through slirp4netns")  # fmt: skip


@functools.cache
def network_probe() -> NetworkProbe:
    """Whether pods can get their own network here, probed once per process."""
    return _probe()
