"""kubetrain's dataset and model initializers: the programs upstream's initializer images run.

``python -m kubetrain.initializers dataset|model`` reads upstream's environment contract
(``STORAGE_URI``, ``ACCESS_TOKEN``, ``IGNORE_PATTERNS``, ``ENDPOINT``, ``ACCESS_KEY_ID``,
``SECRET_ACCESS_KEY``, ``REGION``), fetches ``hf://`` and ``s3://`` sources with
``huggingface_hub`` and boto3 (objects in parallel, each object in parallel ranges), and writes
``/workspace/dataset`` or ``/workspace/model``. With ``KUBETRAIN_INITIALIZER_CACHE`` set (the
local engine sets it) the same object is never fetched twice. A failure ends the process with
exit code 1 and one line naming the URI and the cause, also written to the container's
termination message file. ``cache://SCHEMA/TABLE`` (datasets) bootstraps the TrainJob's data
cache instead, as upstream's cache initializer does (`cache`).

An engine-side program, like the controller: it imports nothing of the controller, the local
engine or the SDK (import-linter contract), so a cluster can run it in a container as well.
"""

from __future__ import annotations

from .config import Config, InitializerError, Kind, read_config
from .main import run

__all__ = ["Config", "InitializerError", "Kind", "read_config", "run"]
