"""``kubetrain describe trainjob NAME``: everything about one job, for a person."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kubetrain.api.access import dicts, list_at, obj_at

if TYPE_CHECKING:
    from kubetrain.client.view import JobView

__all__ = ["add_arguments", "describe_experiment", "describe_job", "run"]


def _short_command(command: list[object]) -> str:
    """The command on one line: an embedded script (a heredoc, ``python -c``) shows its first line
    and how many follow; ``kubetrain get trainjob NAME -o yaml`` prints it whole."""
    import shlex

    if not command:
        return ""
    text = shlex.join(str(c) for c in command)
    first, *rest = text.splitlines()
    return f"{first} … ({len(rest)} more lines)" if rest else first


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.client.connection import add_connection_arguments

    parser.add_argument("kind", metavar="KIND", help="trainjob | experiment")
    parser.add_argument("name", metavar="NAME", help="TrainJob or Experiment name")
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import guarded, print_error
    from kubetrain.client import resources as R

    if R.resolve_kind(args.kind) == (R.EXPERIMENT,):
        return guarded(lambda: _run_experiment(args))
    if R.resolve_kind(args.kind) != (R.TRAINJOB,):
        print_error(
            f'describe knows trainjobs and experiments; for "{args.kind}" use: kubetrain get {args.kind} NAME -o yaml'
        )
        return 2
    return guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.jobs import JobClient

    with JobClient(connect_from_args(args)) as jc:
        view = jc.job(args.name)
        pods = jc.pods(args.name)
        events = jc.events(args.name)
    print(describe_job(view, pods, events))
    return 0


def _run_experiment(args: argparse.Namespace) -> int:
    from kubetrain.client import resources as R
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.jobs import JobClient

    with JobClient(connect_from_args(args)) as jc:
        experiment = jc.get(R.EXPERIMENT, args.name)
        trials = jc.objects(R.TRIAL, labels={"katib.kubeflow.org/experiment": args.name})
    trials.sort(key=lambda t: (t["metadata"].get("creationTimestamp") or "", t["metadata"]["name"]))
    print(describe_experiment(experiment, trials))
    return 0


def describe_experiment(experiment: dict[str, Any], trials: list[dict[str, Any]]) -> str:
    """The ``describe experiment`` text: objective, algorithm, budget, search space, best trial,
    trials and conditions."""
    from kubetrain.cli.present import render_table
    from kubetrain.client.tuning import (
        TRIAL_HEADERS,
        best_text,
        experiment_state,
        objective_text,
        parameter_rows,
        trial_rows,
    )

    spec = obj_at(experiment, "spec")
    status = obj_at(experiment, "status")
    state, reason, message = experiment_state(experiment)
    algorithm = obj_at(spec, "algorithm")
    settings = ", ".join(
        f"{s['name']}={s.get('value')}" for s in dicts(algorithm.get("algorithmSettings"))
    )
    lines = [
        f"Name:          {experiment['metadata']['name']}",
        f"Namespace:     {experiment['metadata'].get('namespace', '')}",
        f"State:         {state}" + (f" ({reason})" if reason else ""),
    ]
    if message:
        lines.append(f"Message:       {message}")
    lines += [
        f"Objective:     {objective_text(experiment)}",
        f"Algorithm:     {algorithm.get('algorithmName')}" + (f" ({settings})" if settings else ""),
        f"Trials:        {status.get('trials', 0)} of {spec.get('maxTrialCount')}, {spec.get('parallelTrialCount')} at a time"
        + (
            f", at most {spec['maxFailedTrialCount']} failed"
            if spec.get("maxFailedTrialCount") is not None
            else ""
        ),
        f"Collector:     {obj_at(spec, 'metricsCollectorSpec', 'collector').get('kind', 'StdOut')}",
        "Parameters:",
    ]
    for name, kind, where in parameter_rows(experiment):
        lines.append(f"  {name}: {kind} {where}".rstrip())
    best = obj_at(status, "currentOptimalTrial")
    if best.get("bestTrialName"):
        lines.append(f"Best trial:    {best['bestTrialName']} ({best_text(experiment)})")
        lines.append(
            "  "
            + ", ".join(
                f"{a['name']}={a['value']}" for a in dicts(best.get("parameterAssignments"))
            )
        )
    lines.append("Trials:" if trials else "Trials:  <none>")
    if trials:
        lines += [
            "  " + line
            for line in render_table(TRIAL_HEADERS, trial_rows(experiment, trials)).splitlines()
        ]
    conditions = dicts(status.get("conditions"))
    if conditions:
        rows = [
            [
                str(c.get("type")),
                str(c.get("status")),
                str(c.get("reason", "")),
                str(c.get("message", "")),
            ]
            for c in conditions
        ]
        lines.append("Conditions:")
        lines += [
            "  " + line
            for line in render_table(["TYPE", "STATUS", "REASON", "MESSAGE"], rows).splitlines()
        ]
    return "\n".join(lines)


def _section(title: str, headers: list[str], rows: list[list[str]]) -> list[str]:
    from kubetrain.cli.present import render_table

    if not rows:
        return [f"{title}:  <none>"]
    return [f"{title}:", *("  " + line for line in render_table(headers, rows).splitlines())]


def _kv(pairs: list[tuple[str, Any]], indent: str = "") -> list[str]:
    shown = [(k, v) for k, v in pairs if v not in (None, "", [], {})]
    width = max((len(k) for k, _ in shown), default=0) + 2
    return [f"{indent}{(k + ':').ljust(width)}{v}" for k, v in shown]


def describe_job(view: JobView, pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> str:
    """The describe text: summary, spec, progress, conditions, jobs, steps, pods, events."""
    from kubetrain.client.present import eta, event_rows, pod_row
    from kubetrain.client.view import age

    spec = obj_at(view.obj, "spec")
    trainer = obj_at(spec, "trainer")
    status = obj_at(view.obj, "status")
    created = f"{view.created} ({age(view.created)} ago)" if view.created else ""
    lines = _kv(
        [
            ("Name", view.name),
            ("Namespace", view.namespace),
            ("State", view.state),
            ("Message", view.message),
            ("Runtime", f"{view.runtime_kind}/{view.runtime_name}"),
            ("Created", created),
            ("Suspend", str(view.suspended).lower()),
            (
                "Active deadline",
                f"{spec['activeDeadlineSeconds']}s" if spec.get("activeDeadlineSeconds") else "",
            ),
            ("Managed by", spec.get("managedBy")),
        ]
    )
    resources = obj_at(trainer, "resourcesPerNode")
    limits = obj_at(resources, "limits") or obj_at(resources, "requests")
    command = [*list_at(trainer, "command"), *list_at(trainer, "args")]
    lines.append("Trainer:")
    lines += _kv(
        [
            ("Nodes", view.num_nodes if view.num_nodes is not None else "-"),
            ("Procs per node", trainer.get("numProcPerNode")),
            ("Image", trainer.get("image")),
            ("Command", _short_command(command)),
            ("Resources", ", ".join(f"{k}={v}" for k, v in limits.items())),
            ("Env", ", ".join(str(e.get("name")) for e in dicts(trainer.get("env")))),
        ],
        "  ",
    ) or ["  <from the runtime>"]
    init = obj_at(spec, "initializer")
    if init:
        lines.append("Initializer:")
        lines += _kv(
            [(k.capitalize(), obj_at(init, k).get("storageUri")) for k in ("dataset", "model")],
            "  ",
        )
    progress = view.progress
    if progress:
        pct = progress.get("progressPercentage")
        metrics = ", ".join(
            f"{m.get('name')}={m.get('value')}" for m in dicts(progress.get("metrics"))
        )
        lines.append("Progress:")
        lines += _kv(
            [
                ("Percent", f"{pct}%" if pct is not None else ""),
                ("ETA", eta(progress.get("estimatedRemainingSeconds"))),
                ("Metrics", metrics),
                ("Updated", progress.get("lastUpdatedTime")),
            ],
            "  ",
        )
    lines += _section(
        "Conditions",
        ["TYPE", "STATUS", "REASON", "MESSAGE", "AGE"],
        [
            [
                str(c.get("type")),
                str(c.get("status")),
                str(c.get("reason") or ""),
                str(c.get("message") or ""),
                age(c.get("lastTransitionTime")),
            ]
            for c in view.conditions
        ],
    )
    lines += _section(
        "Jobs",
        ["NAME", "ACTIVE", "READY", "SUCCEEDED", "FAILED", "SUSPENDED"],
        [
            [str(j.get("name"))]
            + [str(j.get(k, 0)) for k in ("active", "ready", "succeeded", "failed", "suspended")]
            for j in dicts(status.get("jobsStatus"))
        ],
    )
    lines += _section(
        "Steps",
        ["STEP", "POD", "PHASE", "RESTARTS", "EXIT CODE", "REASON"],
        [
            [
                s.name,
                s.pod,
                s.phase,
                str(s.restarts),
                "-" if s.exit_code is None else str(s.exit_code),
                s.reason or "-",
            ]
            for s in view.steps
        ],
    )
    step_pods = {s.pod for s in view.steps}
    older = [p for p in pods if p["metadata"]["name"] not in step_pods]
    if older:  # pods a restart replaced: still worth seeing while they exist
        lines += _section(
            "Other pods",
            ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "EXIT CODE", "IP"],
            [pod_row(p, wide=True) for p in older],
        )
    lines += _section(
        "Events", ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], event_rows(events)
    )
    return "\n".join(lines)
