"""``kubetrain resume JOB...``: let suspended TrainJobs run again."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.cli.cmd_suspend import add_arguments as suspend_arguments

    suspend_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.cmd_suspend import set_suspend
    from kubetrain.cli.present import guarded

    return guarded(lambda: set_suspend(args, False))
