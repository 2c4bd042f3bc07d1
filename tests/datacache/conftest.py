"""A real S3 server with a 3-file Iceberg table, and a cache (head + 2 workers, real
processes) serving it, once per session."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubetrain.testing.s3 import S3Server

ROWS = 5_000


@dataclass(frozen=True)
class IcebergTable:
    s3: S3Server
    metadata_loc: str
    rows: Any  # the pyarrow.Table written

    def aws_env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.s3.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.s3.secret_access_key,
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.s3.endpoint,
        }


@pytest.fixture(scope="session")
def iceberg_table() -> Iterator[IcebergTable]:
    pytest.importorskip("pyiceberg")
    pytest.importorskip("moto")
    from kubetrain.testing.iceberg import s3_properties, sample_table, write_table

    with S3Server(auth=True) as s3:
        rows = sample_table(ROWS)
        props = s3_properties(s3.endpoint, s3.access_key_id, s3.secret_access_key)
        loc = write_table(
            rows, bucket="datacache", namespace="reviews", name="train", properties=props, files=3
        )
        yield IcebergTable(s3, loc, rows)


@pytest.fixture(scope="session")
def cache(iceberg_table: IcebergTable, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from kubetrain.testing.datacache import CacheCluster

    log_dir: Path = tmp_path_factory.mktemp("cache")
    with CacheCluster(
        metadata_loc=iceberg_table.metadata_loc,
        schema="reviews",
        table="train",
        s3=iceberg_table.aws_env(),
        workers=2,
        log_dir=log_dir,
    ) as cluster:
        yield cluster
