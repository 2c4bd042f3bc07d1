"""``kubetrain controller``: the TrainJob controller as it runs in a cluster (the image's entrypoint).

Settings come from upstream's ``Configuration`` file (``--config``), then flags. Inside a pod the
service account's in-cluster config is used; ``--kubeconfig`` points anywhere else (the local
engine, a kind cluster). Exit status: 0 after SIGTERM/SIGINT, 1 when leadership was lost (the
kubelet restarts the container and it becomes a follower), 2 for bad settings.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubetrain.controller.cluster import ControllerConfig
    from kubetrain.controller.webhook import AdmissionRules

__all__ = ["add_arguments", "admission_rules", "config_from_args", "run"]


def admission_rules() -> AdmissionRules:
    """The TrainJob mutating rule and the denial text, shared with the embedded API server."""
    from kubetrain.controller.webhook import AdmissionRules

    return AdmissionRules.default()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        help="upstream Configuration file (config.trainer.kubeflow.org/v1alpha1)",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig (default: in-cluster service account, then $KUBECONFIG)",
    )
    parser.add_argument("--context", help="kubeconfig context")
    parser.add_argument(
        "--namespace", help="reconcile TrainJobs of this namespace only (default: all)"
    )
    parser.add_argument(
        "--operator-namespace",
        help="namespace of the Lease and the webhook Secret (default: the pod's)",
    )
    parser.add_argument(
        "--feature-gates",
        default="",
        help="Name=bool,... (overrides the Configuration's featureGates)",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="use a Lease so only one replica reconciles",
    )
    parser.add_argument(
        "--health-probe-bind-address", help="address of /healthz and /readyz (default :8081)"
    )
    parser.add_argument(
        "--metrics-bind-address", help="address of /metrics (default :8443; 0 turns it off)"
    )
    parser.add_argument("--webhook-port", type=int, help="admission webhook port (default 9443)")
    parser.add_argument(
        "--status-server-port", type=int, help="TrainJobStatus server port (default 10443)"
    )
    parser.add_argument("--no-webhook", action="store_true", help="do not serve admission webhooks")
    parser.add_argument(
        "--cert-dir",
        type=Path,
        help="serving certificate directory (default /tmp/k8s-webhook-server/serving-certs)",
    )
    parser.add_argument("--concurrency", type=int, help="parallel TrainJob reconciles (default 5)")
    parser.add_argument("--identity", help="leader-election identity (default: host_pid_random)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def config_from_args(args: argparse.Namespace) -> ControllerConfig:
    """Defaults, then ``--config``, then flags; raises ``ConfigError`` on bad values."""
    from dataclasses import replace

    from kubetrain.controller.cluster import (
        ConfigError,
        ControllerConfig,
        load_config_file,
        operator_namespace,
        parse_bind_address,
    )
    from kubetrain.runtime.config import FeatureGateError, FeatureGates

    config = ControllerConfig(operator_namespace=operator_namespace())
    if args.config is not None:
        config = load_config_file(args.config, config)
    changes: dict[str, object] = {}
    if args.feature_gates:
        try:
            changes["gates"] = FeatureGates.parse(args.feature_gates, base=config.gates)
        except FeatureGateError as err:
            raise ConfigError(f"--feature-gates: {err}") from err
    for flag, attr in (
        ("namespace", "namespace"),
        ("operator_namespace", "operator_namespace"),
        ("leader_elect", "leader_elect"),
        ("webhook_port", "webhook_port"),
        ("status_server_port", "status_port"),
        ("cert_dir", "cert_dir"),
        ("concurrency", "concurrency"),
    ):
        value = getattr(args, flag)
        if value is not None:
            changes[attr] = value
    if args.no_webhook:
        changes["webhook_enabled"] = False
    if args.health_probe_bind_address is not None:
        changes["health_host"], changes["health_port"] = parse_bind_address(
            args.health_probe_bind_address
        )
    if args.metrics_bind_address is not None:
        if args.metrics_bind_address == "0":
            changes["metrics_port"] = -1
        else:
            changes["metrics_host"], changes["metrics_port"] = parse_bind_address(
                args.metrics_bind_address
            )
    config = replace(config, **changes)  # type: ignore[arg-type]  # values checked by validate()
    config.validate()
    return config


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import signal
    import sys

    from kubetrain.controller.cluster import ClusterController, ConfigError
    from kubetrain.controller.manager import LeadershipLost

    try:
        config = config_from_args(args)
    except ConfigError as err:
        print(f"kubetrain controller: {err}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    rules = admission_rules()

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        from kubetrain.kube.client import connect

        client = connect(args.kubeconfig, context=args.context)
        try:
            await ClusterController(client, config, rules, identity=args.identity).run(stop)
        except LeadershipLost as lost:
            print(f"kubetrain controller: leadership lost by {lost}; exiting", file=sys.stderr)
            return 1
        finally:
            await client.close()
        return 0

    from kubetrain.kube.eventloop import run as run_loop

    # uvloop where installed: the controller is bound by the CPU its requests and its webhook
    # answers cost, and uvloop's compiled loop and TLS cost less of it. Its caches hold every
    # TrainJob, JobSet and child ConfigMap it watches.
    return run_loop(main(), holds_objects=True)


if __name__ == "__main__":  # pragma: no cover  (python -m kubetrain.cli.cmd_controller ...)
    _parser = argparse.ArgumentParser(prog="kubetrain controller")
    add_arguments(_parser)
    raise SystemExit(run(_parser.parse_args()))
