"""kubetrain's distributed data cache: upstream's protocol on ``pyarrow.flight``.

- ``python -m kubetrain.datacache [head|worker] HOST PORT``: a cache head or worker reading
  an Iceberg table (``METADATA_LOC``, ``SCHEMA_NAME``, ``TABLE_NAME``) with pyiceberg; the
  program the local engine runs for upstream's ``data-cache`` image, and an image's entry
  point on a cluster.
- `ShardReader`: one shard's RecordBatches, prefetched, resumed after a cache restart.
- ``kubetrain.datacache.dataset.CacheDataset``: the PyTorch IterableDataset over it (imports
  torch, so it is not imported here).

An engine-side program like the initializers: it imports nothing of the controller, the
local engine, the SDK or the CLI (import-linter contract).
"""

from __future__ import annotations

from .protocol import IndexPair, decode_pair, encode_pair, partition_range
from .reader import CacheReadError, ShardReader, default_endpoint, shard_index

__all__ = [
    "CacheReadError",
    "IndexPair",
    "ShardReader",
    "decode_pair",
    "default_endpoint",
    "encode_pair",
    "partition_range",
    "shard_index",
]
