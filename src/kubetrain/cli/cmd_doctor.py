"""``kubetrain doctor``: how pods run on this machine (sandbox, images, tools) and the daemon."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=["yaml", "json"], help="print the report as data")


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import guarded

    return guarded(lambda: _run(args))


def _report() -> dict[str, Any]:
    import dataclasses

    from kubetrain.client.daemon import daemon_report
    from kubetrain.local.sandbox.doctor import doctor_report

    sandbox = dataclasses.asdict(doctor_report())
    return {"sandbox": sandbox, "daemon": daemon_report()}


def _run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import dump

    report = _report()
    if args.output:
        dump(report, args.output)
        return 0
    print(_text(report))
    return 0


def _text(report: dict[str, Any]) -> str:
    sb = report["sandbox"]
    yes = {True: "yes", False: "no"}
    lines = [
        f"Sandbox:           {sb['mode']}" + (f" ({sb['reason']})" if sb.get("reason") else ""),
        f"  bwrap:           {sb.get('bwrap') or 'not found'}"
        + (f" ({sb['bwrap_version']})" if sb.get("bwrap_version") else ""),
        f"  user namespaces: {yes[bool(sb['user_namespaces'])]}"
        + (f" ({sb['user_namespaces_detail']})" if sb.get("user_namespaces_detail") else ""),
        f"  running as root: {yes[bool(sb['running_as_root'])]}",
        f"Network:           {sb.get('network', 'host')}"
        + (f" ({sb['network_reason']})" if sb.get("network_reason") else ""),
        *(
            [f"  missing:         apt-get install {' '.join(sb['network_missing'])}"]
            if sb.get("network_missing")
            else []
        ),
        f"Limits:            {'enforced' if sb.get('limits_enforced') else 'not enforced'}"
        + (f" ({sb['limits_reason']})" if sb.get("limits_reason") else ""),
        "Images (image -> local environment):",
        *(f"  {pattern:<16} {prefix}" for pattern, prefix in sb["images"].items()),
        "Tools:",
        *(f"  {tool:<16} {where or 'missing'}" for tool, where in sb["tools"].items()),
    ]
    if sb.get("limitations"):
        lines.append("Limitations:")
        lines += [f"  - {text}" for text in sb["limitations"]]
    daemon = report["daemon"]
    lines.append(f"Daemon:            {daemon['summary']}")
    lines.append(f"  home:            {daemon['home']}")
    return "\n".join(lines)
