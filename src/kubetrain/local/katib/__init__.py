"""Katib Experiments on the local engine: the Experiment controller and Optuna suggestions.

The daemon runs ``run_katib`` beside the executor and the TrainJob controller; the rules
(defaults, validation, trial and experiment status) are ``kubetrain.runtime.katib``'s.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from kubetrain.local.katib.controller import ExperimentController
from kubetrain.local.katib.suggest import Suggester, SuggestionError

__all__ = ["ExperimentController", "Suggester", "SuggestionError", "run_katib"]


async def run_katib(kubeconfig: Path, stop: asyncio.Event) -> None:
    """Run the Experiment controller against the API server of ``kubeconfig`` until ``stop``."""
    from kubetrain.controller import connect

    client = connect(kubeconfig)
    try:
        await ExperimentController(client).run(stop)
    finally:
        await client.close()
