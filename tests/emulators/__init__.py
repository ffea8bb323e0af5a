"""Real storage servers on 127.0.0.1 for the cloud store tests, started lazily once per test session.

One module per backend (s3, gcs, azure, http) exposes a lazily started server and
``make_store(tmp_path) -> Store`` (a fresh, empty bucket/container/prefix each call) plus
``reopen_read_only(store) -> Store`` so the store conformance suite runs on it; ``proxy``
holds the fault-injecting, latency-adding, request-counting reverse proxy.
"""
