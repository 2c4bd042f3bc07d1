"""Pod DNS names, loopback addresses and the generated /etc/hosts.

Every pod gets its own address in 127.0.0.0/8 (all of it is loopback on Linux), so two pods
can both listen on port 29500 of their own address and name each other as on a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "hosts_file",
    "jobset_hosts",
    "loopback_address",
    "pod_dns_names",
    "service_dns_names",
]

CLUSTER_DOMAIN = "cluster.local"


def pod_dns_names(hostname: str, subdomain: str | None, namespace: str) -> list[str]:
    """The names a cluster DNS answers for a pod behind a headless Service, shortest first."""
    if not subdomain:
        return [hostname]
    # ``<host>.<subdomain>.<namespace>`` resolves through the search path (svc.cluster.local);
    # LeaderWorkerSet's LWS_LEADER_ADDRESS is this form.
    ns = f"{hostname}.{subdomain}.{namespace}"
    return [hostname, f"{hostname}.{subdomain}", ns, f"{ns}.svc", f"{ns}.svc.{CLUSTER_DOMAIN}"]


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names cluster DNS answers for a Service, shortest first (the search path's forms)."""
    svc = f"{service}.{namespace}.svc"
    return [service, f"{service}.{namespace}", svc, f"{svc}.{CLUSTER_DOMAIN}"]


def loopback_address(index: int) -> str:
    """The ``index``-th pod address: 127.0.0.2, 127.0.0.3, … (127.0.0.1 stays the host's).

    Host bytes 0 and 255 are skipped in each /24 so no address looks like a network or
    broadcast address to tools that still care.
    """
    if index < 0:
        raise ValueError("index must be >= 0")
    per_block = 254
    block, offset = divmod(index + 1, per_block)
    if block >= 256 * 256:
        raise ValueError("out of loopback addresses")
    return f"127.{block // 256}.{block % 256}.{offset + 1}"


def hosts_file(
    hosts: Mapping[str, str],
    own: Iterable[str] = (),
    own_ip: str | None = None,
    services: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """``/etc/hosts`` text: localhost lines, then one line per address with all its names.

    ``own`` names (the pod's hostname forms) are added for ``own_ip`` when the caller's map
    lacks them, as the kubelet writes the pod's own entry. ``services``: name → every
    endpoint address, one line each after the pods (a resolver answers the first).
    """
    by_ip: dict[str, list[str]] = {}
    for name, ip in hosts.items():
        by_ip.setdefault(ip, []).append(name)
    if own_ip:
        mine = by_ip.setdefault(own_ip, [])
        for name in own:
            if name not in mine:
                mine.append(name)
    lines = [
        "# Kubernetes-style hosts file written by kubetrain.",
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost ip6-localhost ip6-loopback",
    ]
    for ip, names in by_ip.items():
        # Longest (fully qualified) name first, as the kubelet does, so reverse lookups of an
        # address give its FQDN.
        ordered = sorted(names, key=lambda n: (-n.count("."), n))
        lines.append(f"{ip}\t{' '.join(ordered)}")
    by_endpoint: dict[str, list[str]] = {}
    for name, ips in (services or {}).items():
        for ip in ips:
            by_endpoint.setdefault(ip, []).append(name)
    for ip, names in by_endpoint.items():
        lines.append(f"{ip}\t{' '.join(sorted(names, key=lambda n: (-n.count('.'), n)))}")
    return "\n".join(lines) + "\n"


def jobset_hosts(pods: Iterable[tuple[str, str | None, str, str]]) -> dict[str, str]:
    """The ``hosts`` map for a JobSet: every DNS name of each ``(hostname, subdomain,
    namespace, address)`` pod → its address."""
    out: dict[str, str] = {}
    for hostname, subdomain, namespace, address in pods:
        for name in pod_dns_names(hostname, subdomain, namespace):
            out[name] = address
    return out
