"""Benchmarks: each prints our figure beside a peer's measured in the same run (`make bench`)."""
