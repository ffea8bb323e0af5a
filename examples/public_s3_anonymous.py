"""Read the tutorials' public S3 bucket anonymously and print "Hello from the cloud!" (sync API).

    python examples/public_s3_anonymous.py                  # s3://zarr-demo/store on AWS, eu-west-2
    python examples/public_s3_anonymous.py s3://BUCKET/PREFIX --array foo/bar/baz --region us-east-1
    python examples/public_s3_anonymous.py --endpoint-url http://127.0.0.1:9000    # MinIO, moto, ...

Requests are sent unsigned (``anon=True``): no credentials are needed, and none are looked
for. The endpoint may also come from the environment (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL).
The tutorial's version, with s3fs and zarr-python:

    s3_fs = s3fs.S3FileSystem(anon=True, client_kwargs=dict(region_name="eu-west-2"))
    zarr_root = zarr.group(store=s3fs.S3Map(root="zarr-demo/store", s3=s3_fs, check=False))
"""

import argparse
import os
from collections.abc import Sequence
from typing import Any

import asyncarr.sync as za

DEFAULT_URL = "s3://zarr-demo/store"
DEFAULT_REGION = "eu-west-2"


def storage_options(region: str, endpoint_url: str | None) -> dict[str, Any]:
    """Anonymous S3 options: unsigned requests to ``region`` (or to ``endpoint_url``)."""
    options: dict[str, Any] = {"anon": True, "region": region}
    if endpoint_url:
        options["endpoint_url"] = endpoint_url
    return options


def main(argv: Sequence[str] | None = None) -> None:
    """Open the group read-only, then print the array, its info table and its bytes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", default=DEFAULT_URL, help=f"the group's URL (default {DEFAULT_URL})")
    parser.add_argument("--array", default="foo/bar/baz", help="the array's path in the group")
    parser.add_argument("--region", default=DEFAULT_REGION, help=f"the bucket's region (default {DEFAULT_REGION})")
    parser.add_argument(
        "--endpoint-url",
        default=os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
        help="an S3-compatible server instead of AWS",
    )
    args = parser.parse_args(argv)

    # mode="r": a public bucket is read, never written (the tutorial's zarr.group() would create a missing group).
    zarr_root = za.open_group(args.url, mode="r", storage_options=storage_options(args.region, args.endpoint_url))
    z_array = zarr_root[args.array]
    print(z_array)
    print(z_array.info)
    print(z_array[:].tobytes())


if __name__ == "__main__":
    main()
