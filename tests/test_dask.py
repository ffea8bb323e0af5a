"""asyncarr.dask: dask arrays read from and written to Zarr arrays, compared with NumPy.

Reads and writes run with the threaded scheduler and on one real two-process LocalCluster
(started once for the module). Its worker processes start without AWS credentials in their
environment, and the S3 tests use the credential-checking moto: a write or read that works
there got its credentials from the pickled store configuration.
"""

from __future__ import annotations

import logging
import os
import pickle
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
from dask.delayed import Delayed
from distributed import Client, LocalCluster
from emulators import s3

import asyncarr.sync as za
from asyncarr.dask import align_to_write_units, from_zarr, to_zarr, write_unit
from asyncarr.errors import ContainsArrayError, ReadOnlyError
from asyncarr.stores import MemoryStore

SHAPE = (800, 1000)
"""The issue's failing case: 800,000 elements, dask blocks (37, 41), target chunks (16, 16) in shards (64, 64)."""
CUTTING_BLOCKS = (37, 41)
AWS_CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


def reference(shape: tuple[int, ...] = SHAPE) -> np.ndarray:
    """Distinct values everywhere, so a lost update anywhere shows."""
    return np.arange(np.prod(shape), dtype="f8").reshape(shape) * 1.5 + 0.25


@pytest.fixture(scope="module")
def cluster_client() -> Iterator[Client]:
    """A two-process LocalCluster whose workers have no AWS credentials in their environment."""
    hidden = {name: os.environ.pop(name) for name in AWS_CREDENTIAL_VARIABLES if name in os.environ}
    try:
        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
    finally:
        os.environ.update(hidden)
    client = Client(cluster, set_as_default=False)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@pytest.fixture
def on_cluster(cluster_client: Client) -> Iterator[Client]:
    """Computations in the test run on the two-process cluster."""
    with dask.config.set(scheduler=cluster_client):
        yield cluster_client


@pytest.fixture
def on_threads() -> Iterator[None]:
    """Computations in the test run on the threaded scheduler."""
    with dask.config.set(scheduler="threads"):
        yield


@pytest.fixture(scope="module")
def checking_moto() -> s3.AuthenticatingMoto:
    """The moto server that refuses requests not signed with its own user's credentials."""
    return s3.authenticating_moto()


def s3_options(server: s3.AuthenticatingMoto) -> dict[str, Any]:
    """Storage options carrying the checking moto's credentials (the workers have no others)."""
    return {"endpoint_url": server.endpoint, "region": s3.REGION, "key": server.key, "secret": server.secret}


def store_tasks(graph: Any) -> list[Any]:
    """Keys of the tasks that write blocks into a target."""
    return [key for key in dict(graph) if isinstance(key, tuple) and str(key[0]).startswith("store-map")]


# -- from_zarr -----------------------------------------------------------------------------


def test_from_zarr_blocks_are_shards_of_a_sharded_array(tmp_path: Path, on_threads: None) -> None:
    data = reference((300, 200))
    za.array(data, store=tmp_path / "a.zarr", chunks=(16, 16), shards=(64, 64))
    x = from_zarr(str(tmp_path / "a.zarr"))
    assert x.chunksize == (64, 64)
    assert x.chunks == da.core.normalize_chunks((64, 64), data.shape)
    np.testing.assert_array_equal(x.compute(), data)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_from_zarr_blocks_are_chunks_without_sharding(tmp_path: Path, on_threads: None, zarr_format: int) -> None:
    data = reference((300, 200))
    za.array(data, store=tmp_path / "a.zarr", chunks=(25, 30), zarr_format=zarr_format)
    x = from_zarr(tmp_path / "a.zarr")
    assert x.chunksize == (25, 30)
    np.testing.assert_array_equal(x.compute(), data)


def test_from_zarr_honours_explicit_chunks_for_reading(tmp_path: Path, on_threads: None) -> None:
    data = reference((300, 200))
    za.array(data, store=tmp_path / "a.zarr", chunks=(16, 16), shards=(64, 64))
    x = from_zarr(str(tmp_path / "a.zarr"), chunks=(37, 41))
    assert x.chunksize == (37, 41)
    np.testing.assert_array_equal(x.compute(), data)
    np.testing.assert_array_equal(x[5:250:7, ::-3].compute(), data[5:250:7, ::-3])


def test_from_zarr_takes_open_arrays_of_both_apis(tmp_path: Path, on_threads: None) -> None:
    data = reference((100, 60))
    array = za.array(data, store=tmp_path / "a.zarr", chunks=(10, 20))
    for opened in (array, array.async_array):
        x = from_zarr(opened)
        assert x.chunksize == (10, 20)
        np.testing.assert_array_equal(x.compute(), data)
    with pytest.raises(TypeError, match="path"):
        from_zarr(array, path="elsewhere")


def test_from_zarr_names_are_deterministic(tmp_path: Path) -> None:
    za.array(reference((100, 60)), store=tmp_path / "a.zarr", chunks=(10, 20))
    url = str(tmp_path / "a.zarr")
    assert from_zarr(url).name == from_zarr(url).name == from_zarr(za.open_array(url, mode="r")).name
    assert from_zarr(url).name != from_zarr(url, chunks=(20, 20)).name


def test_from_zarr_graph_holds_configuration_not_data(tmp_path: Path) -> None:
    data = reference()
    za.array(data, store=tmp_path / "a.zarr", chunks=(16, 16), shards=(64, 64))
    x = from_zarr(str(tmp_path / "a.zarr"))
    graph_bytes = len(pickle.dumps(x.__dask_graph__()))
    assert graph_bytes < 20_000 < data.nbytes // 100


def test_from_zarr_reads_on_a_process_cluster(tmp_path: Path, on_cluster: Client) -> None:
    data = reference()
    za.array(data, store=tmp_path / "a.zarr", chunks=(16, 16), shards=(64, 64))
    x = from_zarr(str(tmp_path / "a.zarr"))
    np.testing.assert_array_equal(x.compute(), data)
    np.testing.assert_allclose((x * 2).sum(axis=0).compute(), (data * 2).sum(axis=0))


# -- aligning blocks to write units --------------------------------------------------------


def test_write_unit_is_the_shard_where_sharded_else_the_chunk(tmp_path: Path) -> None:
    sharded = za.create((100, 100), chunks=(16, 16), shards=(64, 64), dtype="f8", store=tmp_path / "s.zarr")
    plain = za.create((100, 100), chunks=(16, 16), dtype="f8", store=tmp_path / "p.zarr")
    assert write_unit(sharded) == (64, 64)
    assert write_unit(plain) == (16, 16)


def test_blocks_cutting_through_write_units_are_rechunked_to_multiples() -> None:
    x = da.zeros(SHAPE, chunks=CUTTING_BLOCKS)
    aligned = align_to_write_units(x, (64, 64))
    for axis_blocks, size in zip(aligned.chunks, SHAPE, strict=True):
        assert all(block % 64 == 0 for block in axis_blocks[:-1])
        assert sum(axis_blocks) == size


def test_aligned_blocks_are_left_alone() -> None:
    x = da.zeros(SHAPE, chunks=((64, 128, 608), 200))
    assert align_to_write_units(x, (64, 100)) is x


def test_to_zarr_writes_shard_aligned_blocks(tmp_path: Path) -> None:
    x = da.zeros(SHAPE, chunks=CUTTING_BLOCKS)
    written = to_zarr(x, str(tmp_path / "a.zarr"), chunks=(16, 16), shards=(64, 64), compute=False)
    aligned = align_to_write_units(x, (64, 64))
    assert len(store_tasks(written.__dask_graph__())) == aligned.npartitions == 13 * 16


# -- to_zarr -------------------------------------------------------------------------------


def test_to_zarr_cutting_through_shards_from_processes_loses_nothing(tmp_path: Path, on_cluster: Client) -> None:
    data = reference()
    to_zarr(da.from_array(data, chunks=CUTTING_BLOCKS), str(tmp_path / "a.zarr"), chunks=(16, 16), shards=(64, 64))
    written = za.open_array(str(tmp_path / "a.zarr"), mode="r")
    assert (written.chunks, written.shards) == ((16, 16), (64, 64))
    np.testing.assert_array_equal(written[...], data)


def test_to_zarr_cutting_through_chunks_from_processes_loses_nothing(tmp_path: Path, on_cluster: Client) -> None:
    data = reference()
    target = za.create(SHAPE, chunks=(16, 16), dtype="f8", store=tmp_path / "a.zarr")
    to_zarr(da.from_array(data, chunks=CUTTING_BLOCKS), target)
    np.testing.assert_array_equal(target[...], data)


def test_to_zarr_on_threads_into_an_async_array(tmp_path: Path, on_threads: None) -> None:
    data = reference((300, 200)).astype("i4")
    target = za.create(data.shape, chunks=(16, 16), shards=(32, 64), dtype="i4", store=tmp_path / "a.zarr")
    to_zarr(da.from_array(data, chunks=(7, 9)), target.async_array)
    np.testing.assert_array_equal(target[...], data)


def test_to_zarr_creates_with_the_blocks_as_chunks_by_default(tmp_path: Path, on_threads: None) -> None:
    data = reference((300, 200))
    to_zarr(da.from_array(data, chunks=(50, 40)), str(tmp_path / "a.zarr"), zarr_format=2, fill_value=-1.0)
    written = za.open_array(str(tmp_path / "a.zarr"), mode="r")
    assert (written.chunks, written.zarr_format, written.fill_value) == ((50, 40), 2, -1.0)
    np.testing.assert_array_equal(written[...], data)


def test_to_zarr_refuses_to_overwrite_unless_told(tmp_path: Path, on_threads: None) -> None:
    url = str(tmp_path / "a.zarr")
    to_zarr(da.zeros((10, 10), chunks=5), url)
    with pytest.raises(ContainsArrayError):
        to_zarr(da.ones((10, 10), chunks=5), url)
    to_zarr(da.ones((20, 10), chunks=5), url, overwrite=True)
    np.testing.assert_array_equal(za.open_array(url, mode="r")[...], np.ones((20, 10)))
    to_zarr(da.full((20, 10), 2.0, chunks=5), url, mode="a")
    np.testing.assert_array_equal(za.open_array(url, mode="r")[...], np.full((20, 10), 2.0))
    with pytest.raises(ValueError, match="shape"):
        to_zarr(da.ones((30, 10), chunks=5), url, mode="r+")


def test_to_zarr_into_an_open_array_takes_no_creation_arguments(tmp_path: Path) -> None:
    target = za.zeros((10, 10), chunks=5, store=tmp_path / "a.zarr")
    with pytest.raises(TypeError, match="chunks, fill_value"):
        to_zarr(da.ones((10, 10), chunks=5), target, chunks=(2, 2), fill_value=3)
    assert target.nchunks_initialized == 0


def test_to_zarr_with_shards_alone_guesses_inner_chunks_within_a_shard(tmp_path: Path, on_threads: None) -> None:
    data = reference((300, 200))
    to_zarr(da.from_array(data, chunks=CUTTING_BLOCKS), str(tmp_path / "a.zarr"), shards=(64, 64))
    written = za.open_array(str(tmp_path / "a.zarr"), mode="r")
    assert written.shards == (64, 64)
    assert all(shard % chunk == 0 for shard, chunk in zip(written.shards, written.chunks, strict=True))
    np.testing.assert_array_equal(written[...], data)


def test_to_zarr_refuses_a_read_only_array(tmp_path: Path) -> None:
    za.zeros((10, 10), chunks=5, store=tmp_path / "a.zarr")
    with pytest.raises(ReadOnlyError):
        to_zarr(da.ones((10, 10), chunks=5), za.open_array(str(tmp_path / "a.zarr"), mode="r"))


def test_to_zarr_deferred_writes_only_when_computed(tmp_path: Path, on_cluster: Client) -> None:
    data = reference()
    za.array(data, store=tmp_path / "source.zarr", chunks=(16, 16), shards=(64, 64))
    doubled = from_zarr(str(tmp_path / "source.zarr")) * 2
    written = to_zarr(doubled, str(tmp_path / "out.zarr"), chunks=(128, 128), compute=False)
    assert isinstance(written, Delayed)
    assert len(pickle.dumps(written.__dask_graph__())) < 20_000 < data.nbytes // 100
    target = za.open_array(str(tmp_path / "out.zarr"), mode="r")
    assert target.nchunks_initialized == 0
    assert written.compute() is None
    np.testing.assert_array_equal(target[...], data * 2)


def test_a_memory_store_works_on_threads_without_being_pickled(on_threads: None) -> None:
    data = reference((100, 60))
    target = za.create(data.shape, chunks=(16, 16), dtype="f8", store=MemoryStore())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pickling a writable MemoryStore array warns; threads never need to
        to_zarr(da.from_array(data, chunks=(7, 9)), target)
        np.testing.assert_array_equal(from_zarr(target).compute(), data)
    np.testing.assert_array_equal(target[...], data)


def test_to_zarr_on_a_memory_store_refuses_process_workers(on_cluster: Client) -> None:
    target = za.create((100, 60), chunks=(16, 16), dtype="f8", store=MemoryStore())
    with pytest.raises(ValueError, match="MemoryStore lives in this process"):
        to_zarr(da.ones((100, 60), chunks=(7, 9)), target)
    assert target.nchunks_initialized == 0


# -- S3 ------------------------------------------------------------------------------------


def test_cluster_workers_have_no_aws_credentials_of_their_own(cluster_client: Client) -> None:
    found = cluster_client.run(lambda: sorted(name for name in AWS_CREDENTIAL_VARIABLES if name in os.environ))
    assert list(found.values()) == [[], []]


def test_s3_write_and_read_from_processes_with_pickled_credentials(
    checking_moto: s3.AuthenticatingMoto, on_cluster: Client
) -> None:
    data = reference((300, 400))
    url = f"s3://{checking_moto.new_bucket()}/data/a.zarr"
    options = s3_options(checking_moto)
    to_zarr(da.from_array(data, chunks=CUTTING_BLOCKS), url, chunks=(16, 16), shards=(64, 64), storage_options=options)
    written = za.open_array(url, mode="r", storage_options=options)
    assert written.shards == (64, 64)
    np.testing.assert_array_equal(written[...], data)
    x = from_zarr(url, storage_options=options)
    assert x.chunksize == (64, 64)
    np.testing.assert_array_equal(x.compute(), data)
