"""Chunk codecs: the pipeline that encodes and decodes chunks, v3 codec classes, the codec registry
and the shared codec thread pool."""

from asyncarr.codecs.executor import codec_executor, run_in_codec_pool
from asyncarr.codecs.pipeline import CodecPipeline
from asyncarr.codecs.registry import (
    codec_from_v2_config,
    codec_from_v3_json,
    normalize_codecs,
    normalize_compression,
    normalize_compressor,
    normalize_filters,
    to_v3_json,
    v3_codec_chain,
)

__all__ = [
    "CodecPipeline",
    "codec_executor",
    "codec_from_v2_config",
    "codec_from_v3_json",
    "normalize_codecs",
    "normalize_compression",
    "normalize_compressor",
    "normalize_filters",
    "run_in_codec_pool",
    "to_v3_json",
    "v3_codec_chain",
]
