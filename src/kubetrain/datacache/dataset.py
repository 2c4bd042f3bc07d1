"""`CacheDataset`: a PyTorch IterableDataset over the data cache (upstream has it only in a
notebook). Each rank, and each DataLoader worker of a rank, reads its own shard; the shards
together are the whole table, each row once.

    dataset = CacheDataset(transform=to_tensors)   # endpoint from TRAIN_JOB_NAME
    loader = DataLoader(dataset, batch_size=None)  # the dataset yields whole batches
    for epoch in range(epochs):
        dataset.set_epoch(epoch)
        for batch in loader: ...
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import torch.distributed as dist
from torch.utils.data import IterableDataset, get_worker_info

from .reader import ShardReader, default_endpoint, shard_index

__all__ = ["CacheDataset"]


def _rank_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


class CacheDataset(IterableDataset[Any]):
    """The rows of this rank's shard as ``pyarrow.RecordBatch`` es of ``batch_size`` rows (the
    last one may be shorter), each passed through ``transform`` when given.

    ``rotate=True`` moves every rank to another shard each epoch (upstream's notebook does,
    through its seed); the shards stay disjoint either way.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        batch_size: int = 1024,
        transform: Callable[[Any], Any] | None = None,
        prefetch: int = 4,
        rotate: bool = False,
        seed: int = 0,
        retry_timeout_s: float = 120.0,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, not {batch_size}")
        self.endpoint = endpoint or default_endpoint()
        self.batch_size = batch_size
        self.transform = transform
        self.prefetch = prefetch
        self.rotate = rotate
        self.seed = seed
        self.epoch = 0
        self.retry_timeout_s = retry_timeout_s

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def shard(self) -> tuple[int, int]:
        """(shard, shards) this process reads now."""
        rank, world = _rank_world()
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        rotation = self.seed + self.epoch if self.rotate else 0
        return shard_index(rank, world, worker, workers, rotation)

    def batches(self) -> Iterator[Any]:
        """The shard's rows re-cut to ``batch_size`` rows, without copying where a batch from
        the cache already holds enough."""
        import pyarrow as pa

        shard, shards = self.shard()
        reader = ShardReader(
            self.endpoint, shard, shards, prefetch=self.prefetch,
            retry_timeout_s=self.retry_timeout_s,
        )  # fmt: skip
        pending: list[Any] = []
        held = 0
        for batch in reader:
            pending.append(batch)
            held += batch.num_rows
            while held >= self.batch_size:
                table = pa.Table.from_batches(pending)
                yield _one_batch(table.slice(0, self.batch_size))
                pending = table.slice(self.batch_size).to_batches()
                held -= self.batch_size
        if held:
            yield _one_batch(pa.Table.from_batches(pending))

    def __iter__(self) -> Iterator[Any]:
        for batch in self.batches():
            yield self.transform(batch) if self.transform else batch


def _one_batch(table: Any) -> Any:
    # A slice inside one source batch stays a view; one spanning two is copied once.
    batches = table.to_batches()
    return batches[0] if len(batches) == 1 else table.combine_chunks().to_batches()[0]
