"""The ``kubetrain`` command.

Each sub-command lives in its own ``cmd_<name>.py`` module exposing ``add_arguments(parser)``
and ``run(args) -> int``. Modules are imported only when their command runs (or when building
``--help`` for that command), so ``kubetrain --help`` stays well under half a second.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]

# name -> (module, one-line help). Order is the order shown in --help.
COMMANDS: dict[str, tuple[str, str]] = {
    "render": ("cmd_render", "print every object a TrainJob would create (dry run)"),
    "validate": ("cmd_validate", "check TrainJobs and runtimes; silent when valid"),
    "runtimes": ("cmd_runtimes", "list the default training runtimes, or print one"),
    "run": ("cmd_run", "apply a TrainJob and follow it to the end (logs, progress, exit code)"),
    "apply": ("cmd_apply", "create or update TrainJobs, runtimes and other objects from files"),
    "get": ("cmd_get", "list TrainJobs, runtimes or pods (-w to watch)"),
    "describe": ("cmd_describe", "show one TrainJob: runtime, steps, conditions, events"),
    "logs": ("cmd_logs", "print or follow a TrainJob step's output"),
    "events": ("cmd_events", "list the Events of a TrainJob and its JobSet and pods"),
    "metrics": (
        "cmd_metrics",
        "print or plot the progress reports (loss, metrics) a TrainJob sent",
    ),
    "suspend": ("cmd_suspend", "suspend TrainJobs (their pods stop)"),
    "resume": ("cmd_resume", "resume suspended TrainJobs"),
    "delete": ("cmd_delete", "delete TrainJobs and wait until every process is gone"),
    "serve": (
        "cmd_serve",
        "run the local control plane in the foreground (Kubernetes API + kubeconfig)",
    ),
    "daemon": ("cmd_daemon", "start, stop or inspect the local control plane daemon"),
    "doctor": ("cmd_doctor", "check how pods run on this machine and what is missing"),
    "install": ("cmd_install", "print the Kubernetes install manifest"),
    "controller": ("cmd_controller", "run the TrainJob controller (in a cluster)"),
    "migrate": ("cmd_migrate", "convert Training Operator v1 jobs to TrainJobs, with a report"),
    "upgrade-check": (
        "cmd_upgrade_check",
        "check TrainJobs and runtimes written for Trainer v2.0-v2.2 against v2.3 (--fix)",
    ),
    "tune": ("cmd_tune", "start a hyperparameter search (Katib Experiment) and follow its trials"),
    "dashboard": (
        "cmd_dashboard",
        "serve a web UI: jobs, progress, curves and logs (token-protected)",
    ),
}


def _build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubetrain",
        description="Kubeflow Trainer v2 TrainJobs: render, validate, and run them locally or on Kubernetes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        cmd_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == wanted:
            mod = importlib.import_module(f"kubetrain.cli.{module}")
            mod.add_arguments(cmd_parser)
            cmd_parser.set_defaults(_module=mod)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser(args_list)
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        code: int = args._module.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
