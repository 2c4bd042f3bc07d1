"""Create the example's Iceberg table in an S3 server: ``cache.reviews``, 20,000 rows.

    python -m kubetrain.testing.s3 --port 9000 &          # a local S3 server (moto)
    python examples/data-cache/setup.py                   # --endpoint http://127.0.0.1:9000

The table (columns ``id`` 0..19999, ``label``, ``value``, ``text``) is written in four data
files under ``s3://kubetrain-examples/data-cache/``; its metadata file is also copied to the
fixed key ``.../metadata/current.metadata.json``, the ``METADATA_LOC`` the TrainJob names.
"""

from __future__ import annotations

import argparse

BUCKET = "kubetrain-examples"
ROWS = 20_000
CURRENT = "data-cache/cache/reviews/metadata/current.metadata.json"


def main() -> None:
    parser = argparse.ArgumentParser(prog="examples/data-cache/setup.py")
    parser.add_argument("--endpoint", default="http://127.0.0.1:9000")
    parser.add_argument("--access-key-id", default="kubetrain")
    parser.add_argument("--secret-access-key", default="kubetrain-secret")
    args = parser.parse_args()

    import boto3

    from kubetrain.testing.iceberg import s3_properties, sample_table, write_table

    props = s3_properties(args.endpoint, args.access_key_id, args.secret_access_key)
    loc = write_table(
        sample_table(ROWS), bucket=BUCKET, namespace="cache", name="reviews", properties=props,
        files=4, warehouse=f"s3://{BUCKET}/data-cache",
    )  # fmt: skip
    s3 = boto3.session.Session().client(
        "s3", endpoint_url=args.endpoint, aws_access_key_id=args.access_key_id,
        aws_secret_access_key=args.secret_access_key, region_name="us-east-1",
    )  # fmt: skip
    key = loc.removeprefix(f"s3://{BUCKET}/")
    s3.copy_object(Bucket=BUCKET, Key=CURRENT, CopySource={"Bucket": BUCKET, "Key": key})
    print(f"table cache.reviews: {ROWS} rows; METADATA_LOC=s3://{BUCKET}/{CURRENT}")


if __name__ == "__main__":
    main()
