"""Put the example's dataset and starting weights into an S3 bucket.

    python -m kubetrain.testing.s3 --port 9000 &          # a local S3 server (moto)
    python examples/initializers/setup.py                 # --endpoint http://127.0.0.1:9000

Dataset: ``s3://kubetrain-examples/initializers/dataset/part-*.parquet``, 4,096 points around
eight centres in 16 dimensions (columns ``f0``..``f15`` and ``label``), in four Parquet files.
Model: ``s3://kubetrain-examples/initializers/model/`` holds ``config.json`` (the layer
sizes) and ``model.safetensors`` (seeded starting weights). The TrainJob's initializers fetch
both; its trainer reads them from /workspace/dataset and /workspace/model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

BUCKET = "kubetrain-examples"
DATASET_PREFIX = "initializers/dataset"
MODEL_PREFIX = "initializers/model"
FEATURES, CLASSES, SAMPLES, HIDDEN = 16, 8, 4096, 64


def write_dataset(directory: Path, *, files: int = 4, seed: int = 0) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(CLASSES, FEATURES))
    labels = rng.integers(0, CLASSES, SAMPLES)
    points = centres[labels] + rng.normal(size=(SAMPLES, FEATURES)) * 0.8
    directory.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(np.array_split(np.arange(SAMPLES), files)):
        columns: dict[str, Any] = {
            f"f{j}": points[rows, j].astype("float32") for j in range(FEATURES)
        }
        columns["label"] = labels[rows].astype("int64")
        pq.write_table(pa.table(columns), directory / f"part-{i:04d}.parquet")


def write_model(directory: Path, *, seed: int = 0) -> None:
    import torch
    from safetensors.torch import save_file
    from torch import nn

    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))
    directory.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()}, directory / "model.safetensors"
    )
    config = {"features": FEATURES, "hidden": HIDDEN, "classes": CLASSES}
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def upload(
    endpoint: str, access_key_id: str = "kubetrain", secret_access_key: str = "kubetrain-secret"
) -> None:
    import boto3

    from kubetrain.testing.s3 import upload_dir

    client = boto3.session.Session().client(
        "s3", endpoint_url=endpoint, aws_access_key_id=access_key_id,
        aws_secret_access_key=secret_access_key, region_name="us-east-1",
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        write_dataset(Path(tmp) / "dataset")
        write_model(Path(tmp) / "model")
        n = upload_dir(client, BUCKET, DATASET_PREFIX, Path(tmp) / "dataset")
        m = upload_dir(client, BUCKET, MODEL_PREFIX, Path(tmp) / "model")
    print(f"uploaded {n} dataset files and {m} model files to s3://{BUCKET} at {endpoint}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default="http://127.0.0.1:9000")
    parser.add_argument("--access-key-id", default="kubetrain")
    parser.add_argument("--secret-access-key", default="kubetrain-secret")
    args = parser.parse_args()
    upload(args.endpoint, args.access_key_id, args.secret_access_key)
