"""Partial shard reads on S3, counted at a proxy in front of moto: only the index and the chunks needed."""

import asyncio

import numpy as np
from emulators import s3
from emulators.proxy import FaultProxy

import asyncarr.sync as za
from asyncarr.codecs.pipeline import CodecPipeline
from asyncarr.shards import partial_read_codec
from asyncarr.stores.base import ByteRange


def _inner_chunk_nbytes(array: za.Array, shard: bytes, inner_coords: tuple[int, ...]) -> int:
    codec = partial_read_codec(CodecPipeline.from_metadata(array.metadata))
    index = codec.parse_index(ByteRange.last(codec.index_nbytes).apply(shard), "c/0/0")
    return int(index[inner_coords][1]), codec.index_nbytes


def test_one_inner_chunk_of_a_64_chunk_shard_costs_two_gets_and_little_more_than_its_bytes():
    bucket = s3.new_bucket()
    data = np.random.default_rng(1).standard_normal((256, 256)).astype("f4")
    with FaultProxy(s3.moto_endpoint()) as proxy:
        options = {**s3.store_options(), "endpoint_url": proxy.url}
        z = za.open_array(
            f"s3://{bucket}/sharded",
            mode="w",
            shape=(256, 256),
            chunks=(32, 32),
            shards=(256, 256),
            dtype="f4",
            storage_options=options,
        )
        z[:] = data
        shard = asyncio.run(z.store.get("c/0/0"))
        chunk_nbytes, index_nbytes = _inner_chunk_nbytes(z, shard, (3, 5))
        reader = za.open_array(f"s3://{bucket}/sharded", mode="r", storage_options=options)
        proxy.reset_counters()
        np.testing.assert_array_equal(reader[100:110, 170:180], data[100:110, 170:180])
        counts = proxy.counts()
    assert counts["requests_by_method"] == {"GET": 2}, counts
    assert counts["response_bytes"] < 2 * chunk_nbytes + index_nbytes, (counts, chunk_nbytes, index_nbytes)
    assert counts["response_bytes"] < len(shard) / 10
