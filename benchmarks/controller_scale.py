"""Benchmark of ``kubetrain controller`` at scale: N TrainJobs, no executor.

The embedded API server runs as ``kubetrain serve --api-only`` does (own process, https, SQLite
on disk, no controller or executor of its own); the controller runs as ``kubetrain controller``
does in a cluster (own process, leader election, webhook and status servers up, certificate in a
Secret), watching one namespace. This process creates N TrainJobs as fast as the server takes
them and measures:

- settled: seconds from the first create until every TrainJob has its JobSet, every TrainJob
  carries the status this process writes into its JobSet as a JobSet controller would
  (``jobsStatus``), the controller has reconciled at least N times and its work queue is empty
  (followed through watches); then one list checks that every JobSet belongs to a different
  TrainJob and every TrainJob has that status;
- the controller's peak RSS (``VmHWM`` of its process);
- CPU seconds of the API server and of the controller, in all and per TrainJob (milliseconds,
  counted from the first create, so start-up, install and leader election are left out);
- reconciles per second (``kubetrain_reconcile_total`` over the settle time);
- this process's own CPU per TrainJob until settled (``client ms/job``): it shares the machine
  with what it measures.

With ``--rbac-webhooks`` (the default) the cluster is installed as an operator installs it: the
manifests' ServiceAccount, ClusterRole, Role and bindings, Service and webhook configurations
are applied, the controller runs with its ServiceAccount's token (so the API server enforces
the ClusterRole on every call), and the API server calls the controller's webhooks over HTTPS
for every TrainJob (the controller provisions its certificate and injects the caBundle; a
stored Pod on loopback stands for its pod behind the Service). ``--no-rbac-webhooks`` runs the
controller as the admin without webhooks.

Targets: issue 7, 5,000 TrainJobs settled in < 60 s with RSS < 300 MB; issue 20, the same with
RBAC and webhooks on in < 40 s.

    .venv/bin/python benchmarks/controller_scale.py [--jobs 1000 5000] [--no-rbac-webhooks]

``--request-mix`` has the API server write its audit log and reports the controller's requests
per TrainJob by verb and resource (the log costs the server CPU of its own: leave it off when
comparing ``server_cpu_s``).

``--engine-src DIR`` runs the API server and the controller from another checkout's ``src``
(this process and its client stay as they are), to compare two versions on the same
benchmark; ``server_cpu_s`` (CPU seconds of the API server) is the figure that does not
depend on how busy the machine is.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

SERVE = (
    "import argparse, sys\n"
    "from kubetrain.cli import cmd_serve\n"
    "p = argparse.ArgumentParser(); cmd_serve.add_arguments(p)\n"
    "sys.exit(cmd_serve.run(p.parse_args(sys.argv[1:])))\n"
)
TRAINER = "trainer.kubeflow.org/v1alpha1"
JOBSET = "jobset.x-k8s.io/v1alpha2"
NAMESPACE = "bench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _peak_rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", text)
    return int(match.group(1)) / 1024 if match else float("nan")


def _cpu_s(pid: int) -> float:
    # utime + stime of the process, in clock ticks (fields 14 and 15 of /proc/<pid>/stat).
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _config(path: Path, metrics_port: int, health_port: int, webhook_port: int = 0) -> Path:
    import yaml

    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
                "kind": "Configuration",
                "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
                "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}", "secureServing": False},
                "webhook": {"port": webhook_port, "host": "127.0.0.1"},
                "statusServer": {"port": 0},
            }
        )
    )
    return path


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def _install(kube: Any, home: Path, webhook_port: int) -> Path:
    """Apply the manifests' RBAC, Service and webhook configurations; a stored Ready pod on
    loopback plays the controller's pod; returns a kubeconfig with the ServiceAccount's token."""
    import yaml

    from kubetrain.controller.deploy import LABELS, NAME, install_objects
    from kubetrain.controller.deploy import NAMESPACE as OPERATOR

    skip = ("Namespace", "CustomResourceDefinition", "Deployment")
    for obj in install_objects("manager"):
        if obj["kind"] not in skip:
            plural = obj["kind"].lower() + "s"
            await kube.apply(plural, obj, field_manager="kubectl")
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{NAME}-0", "namespace": OPERATOR, "labels": dict(LABELS)},
        "spec": {
            "serviceAccountName": NAME,
            "containers": [{"name": "manager", "image": "kubetrain",
                            "ports": [{"name": "webhook-server", "containerPort": webhook_port}]}],
        },
    }  # fmt: skip
    await kube.create("v1", "pods", pod)
    ready = {"phase": "Running", "podIP": "127.0.0.1",
             "conditions": [{"type": "Ready", "status": "True"}]}  # fmt: skip
    await kube.patch("v1", "pods", pod["metadata"]["name"], {"status": ready},
                     namespace=OPERATOR, subresource="status")  # fmt: skip
    answer = await kube.create(
        "v1",
        f"serviceaccounts/{NAME}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "metadata": {"namespace": OPERATOR}, "spec": {"expirationSeconds": 86400}},
    )  # fmt: skip
    config = yaml.safe_load((home / "kubeconfig").read_text())
    config["users"][0]["user"] = {"token": answer["status"]["token"]}
    path = home / "controller.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


async def _ca_injected(kube: Any) -> bool:
    for plural, name in (
        ("validatingwebhookconfigurations", "validator.trainer.kubeflow.org"),
        ("mutatingwebhookconfigurations", "defaulter.trainer.kubeflow.org"),
    ):
        config = await kube.get("admissionregistration.k8s.io/v1", plural, name)
        if not all((w.get("clientConfig") or {}).get("caBundle") for w in config["webhooks"]):
            return False
    return True


async def _run_once(
    n: int,
    home: Path,
    verbose: bool = False,
    concurrency: int = 5,
    secure: bool = True,
    engine_src: Path | None = None,
    limit_s: float = 600.0,
    request_mix: bool = False,
) -> dict[str, Any]:
    import aiohttp

    from kubetrain.kube.client import connect

    env = dict(os.environ)
    if engine_src is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(engine_src.resolve()), *filter(None, [env.get("PYTHONPATH")])]
        )
    audit = ["--audit-log-path", str(home / "audit.jsonl")] if request_mix else []
    server = subprocess.Popen(
        [sys.executable, "-c", SERVE, "--home", str(home), "--api-only", *audit],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    controller: subprocess.Popen[bytes] | None = None
    kubeconfig = home / "kubeconfig"
    try:
        # Start-up imports take a while on a busy machine: wait for the kubeconfig or an exit.
        deadline = time.monotonic() + 120
        while not kubeconfig.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                output = server.stdout.read().decode(errors="replace") if server.stdout else ""
                raise RuntimeError(f"the API server did not start:\n{output}")
            await asyncio.sleep(0.05)
        # This process's requests may wait long behind the load it makes on a busy machine.
        kube = connect(kubeconfig, timeout=120.0)
        await kube.create(
            "v1",
            "namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        )
        metrics_port, health_port = _free_port(), _free_port()
        webhook_port = _free_port() if secure else 0
        config = _config(home / "controller.yaml", metrics_port, health_port, webhook_port)
        controller_kubeconfig = await _install(kube, home, webhook_port) if secure else kubeconfig
        log = open(home / "controller.log", "wb")  # noqa: SIM115  (closed with the process)
        controller = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kubetrain.cli.cmd_controller",
                "--kubeconfig",
                str(controller_kubeconfig),
                "--config",
                str(config),
                "--namespace",
                NAMESPACE,
                "--operator-namespace",
                "kubeflow-system",
                "--cert-dir",
                str(home / "certs"),
                "--concurrency",
                str(concurrency),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        async with aiohttp.ClientSession() as http:

            async def metrics() -> str:
                async with http.get(metrics_url) as resp:
                    return await resp.text()

            for _ in range(600):
                with contextlib.suppress(aiohttp.ClientError):
                    if _metric(await metrics(), "kubetrain_leader") == 1:
                        break
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError(f"controller never led; see {home / 'controller.log'}")
            for _ in range(600):
                if not secure or await _ca_injected(kube):
                    break
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError(
                    f"the caBundle was never injected; see {home / 'controller.log'}"
                )

            gate = asyncio.Semaphore(64)

            async def create(i: int) -> None:
                body = {
                    "apiVersion": TRAINER,
                    "kind": "TrainJob",
                    "metadata": {"name": f"job-{i:05d}", "namespace": NAMESPACE},
                    "spec": {
                        "runtimeRef": {"name": "torch-distributed"},
                        "trainer": {"numNodes": 2},
                    },
                }
                async with gate:
                    await kube.create(TRAINER, "trainjobs", body)

            # This process plays the JobSet controller: each new JobSet gets the status a
            # cluster's JobSet controller writes once its Jobs exist (one active Job), which
            # the TrainJob controller must carry into the TrainJob's jobsStatus. Progress is
            # followed through watches, not by listing: relisting thousands of objects several
            # times a second would load the API server more than the controller under test.
            jobset_owners: dict[str, str] = {}
            with_status: set[str] = set()
            marking: set[asyncio.Task[None]] = set()
            mark_gate = asyncio.Semaphore(16)

            async def mark_active(name: str) -> None:
                status = {"replicatedJobsStatus": [{"name": "node", "ready": 0, "succeeded": 0,
                          "failed": 0, "active": 1, "suspended": 0}]}  # fmt: skip
                async with mark_gate:
                    await kube.patch(JOBSET, "jobsets", name, {"status": status},
                                     namespace=NAMESPACE, subresource="status")  # fmt: skip

            async def follow_jobsets() -> None:
                async for event_type, obj in kube.watch(
                    JOBSET, "jobsets", namespace=NAMESPACE, timeout_seconds=3600
                ):
                    meta = obj.get("metadata") or {}
                    if event_type == "DELETED":
                        jobset_owners.pop(meta.get("name", ""), None)
                    elif event_type in ("ADDED", "MODIFIED"):
                        owner = (meta.get("ownerReferences") or [{}])[0].get("uid", "")
                        if meta["name"] not in jobset_owners:
                            task = asyncio.create_task(mark_active(meta["name"]))
                            marking.add(task)
                            task.add_done_callback(marking.discard)
                        jobset_owners[meta["name"]] = owner

            async def follow_trainjobs() -> None:
                async for event_type, obj in kube.watch(
                    TRAINER, "trainjobs", namespace=NAMESPACE, timeout_seconds=3600
                ):
                    name = (obj.get("metadata") or {}).get("name", "")
                    if event_type != "DELETED" and (obj.get("status") or {}).get("jobsStatus"):
                        with_status.add(name)
                    else:
                        with_status.discard(name)

            watchers = [
                asyncio.create_task(follow_jobsets()),
                asyncio.create_task(follow_trainjobs()),
            ]
            # CPU spent before the first create (start-up, install, leader election) is not
            # the TrainJobs': the per-TrainJob figures count from here.
            server_cpu_before, controller_cpu_before = _cpu_s(server.pid), _cpu_s(controller.pid)
            own_cpu_before = time.process_time()
            started = time.monotonic()
            await asyncio.gather(*(create(i) for i in range(n)))
            created = time.monotonic() - started
            last_report = started
            try:
                while True:
                    for watcher in watchers:
                        if watcher.done():
                            watcher.result()  # the watch failed: raise its error
                            raise RuntimeError("a watch ended early")
                    for task in list(marking):
                        if task.done():
                            task.result()  # a status write failed: raise its error
                    text = await metrics()
                    done = (
                        len(jobset_owners) == n
                        and len(with_status) == n
                        and _metric(text, "kubetrain_reconcile_total") >= n
                        and _metric(text, "kubetrain_workqueue_depth") == 0
                    )
                    if done:
                        break
                    if verbose and time.monotonic() - last_report > 5:
                        last_report = time.monotonic()
                        print(
                            f"  {last_report - started:5.1f}s: {len(jobset_owners)} JobSets,"
                            f" {len(with_status)} TrainJob statuses,"
                            f" {_metric(text, 'kubetrain_reconcile_total'):.0f} reconciles,"
                            f" queue {_metric(text, 'kubetrain_workqueue_depth'):.0f}",
                            file=sys.stderr,
                        )
                    if time.monotonic() - started > limit_s:
                        raise RuntimeError(
                            f"not settled after {limit_s:.0f} s: {len(jobset_owners)} JobSets,"
                            f" {len(with_status)} TrainJob statuses"
                        )
                    await asyncio.sleep(0.25)
                settled = time.monotonic() - started
                own_cpu = time.process_time() - own_cpu_before
            finally:
                for watcher in watchers:
                    watcher.cancel()
            # The watch's count is checked against the server's own list, once.
            jobsets, _ = await kube.list(JOBSET, "jobsets", namespace=NAMESPACE)
            assert len(jobsets) == n, f"{len(jobsets)} JobSets listed, {n} expected"
            reconciles = _metric(text, "kubetrain_reconcile_total")
            busy = _metric(text, "kubetrain_reconcile_seconds_sum")
        owners = {js["metadata"]["ownerReferences"][0]["uid"] for js in jobsets}
        assert len(owners) == n, "every JobSet belongs to a different TrainJob"
        trainjobs, _ = await kube.list(TRAINER, "trainjobs", namespace=NAMESPACE)
        listed = sum(1 for job in trainjobs if (job.get("status") or {}).get("jobsStatus"))
        assert listed == n, f"{listed} of {n} TrainJobs have a status"
        rss = _peak_rss_mb(controller.pid)
        controller_cpu, server_cpu = _cpu_s(controller.pid), _cpu_s(server.pid)
        forbidden = (home / "controller.log").read_text(errors="replace").count("is forbidden")
        await kube.close()
        mix = _request_mix(home / "audit.jsonl", n) if request_mix else None
        return {
            "jobs": n,
            "create_s": created,
            "settled_s": settled,
            "rss_mb": rss,
            "reconciles": reconciles,
            "reconciles_per_s": reconciles / settled,
            "controller_cpu_s": controller_cpu,
            "server_cpu_s": server_cpu,
            "server_ms_per_job": 1000 * (server_cpu - server_cpu_before) / n,
            "controller_ms_per_job": 1000 * (controller_cpu - controller_cpu_before) / n,
            "client_ms_per_job": 1000 * own_cpu / n,
            "ms_per_reconcile": 1000 * busy / max(reconciles, 1),
            "forbidden_in_log": forbidden,
            **({"controller_requests_per_job": mix} if mix is not None else {}),
        }
    finally:
        for proc in (controller, server):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()


def _request_mix(audit_log: Path, n: int) -> dict[str, float]:
    """The controller's requests per TrainJob by "verb resource[/subresource]", from the audit
    log (it records what RBAC decides: the ServiceAccount's requests, not the admin's). An
    apply that creates its object is decided twice (patch, then create), as kube-apiserver does."""
    counts: dict[str, int] = {}
    with audit_log.open() as lines:
        for line in lines:
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            what = ref.get("resource", "") + (
                f"/{ref['subresource']}" if ref.get("subresource") else ""
            )
            key = f"{event.get('verb')} {what}"
            counts[key] = counts.get(key, 0) + 1
    return {k: round(v / n, 3) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--json", action="store_true", help="print one JSON line per run")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress every 5 s")
    parser.add_argument(
        "--concurrency", type=int, default=5, help="TrainJob workers (upstream ships 5)"
    )
    parser.add_argument(
        "--rbac-webhooks",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="controller under its ServiceAccount's RBAC, webhooks called over HTTPS (default)",
    )
    parser.add_argument(
        "--engine-src",
        type=Path,
        help="run the API server and the controller from this source tree (another checkout)",
    )
    parser.add_argument(
        "--limit", type=float, default=600.0, help="seconds a run may take to settle (600)"
    )
    parser.add_argument(
        "--request-mix",
        action="store_true",
        help="audit-log the controller's requests and report them per TrainJob (costs server CPU)",
    )
    args = parser.parse_args(argv)
    from kubetrain.kube.eventloop import run

    rows = []
    if not args.json:
        print(
            f"{'jobs':>6} {'create s':>9} {'settled s':>10} {'peak RSS MB':>12}"
            f" {'reconciles/s':>13} {'ctl CPU s':>10} {'api CPU s':>10}"
            f" {'ctl ms/job':>11} {'api ms/job':>11} {'client ms/job':>14}",
            flush=True,
        )
    for n in args.jobs:
        with tempfile.TemporaryDirectory(prefix="kubetrain-bench-") as tmp:
            os.environ["KUBETRAIN_HOME"] = tmp
            # This process shares the machine with what it measures: it runs on the same
            # event loop (uvloop where installed) and with the same cheap collector.
            r = run(
                _run_once(
                    n,
                    Path(tmp),
                    args.verbose,
                    args.concurrency,
                    args.rbac_webhooks,
                    args.engine_src,
                    args.limit,
                    args.request_mix,
                ),
                holds_objects=True,
            )
        rows.append(r)
        if args.json:
            print(json.dumps(r), flush=True)
            continue
        print(
            f"{r['jobs']:>6.0f} {r['create_s']:>9.1f} {r['settled_s']:>10.1f} "
            f"{r['rss_mb']:>12.0f} {r['reconciles_per_s']:>13.0f}"
            f" {r['controller_cpu_s']:>10.1f} {r['server_cpu_s']:>10.1f}"
            f" {r['controller_ms_per_job']:>11.2f} {r['server_ms_per_job']:>11.2f}"
            f" {r['client_ms_per_job']:>14.2f}",
            flush=True,
        )
        for what, per_job in (r.get("controller_requests_per_job") or {}).items():
            if per_job >= 0.1:  # leave out start-up and leader election
                print(f"       controller requests per TrainJob: {per_job:5.2f} {what}", flush=True)
    if args.json:
        return 0
    limit = 40 if args.rbac_webhooks else 60
    ok = all(r["settled_s"] < limit and r["rss_mb"] < 300 for r in rows if r["jobs"] <= 5000)
    print(f"targets (5,000 settled < {limit} s, RSS < 300 MB):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
