"""Experiments: the speculative-vs-plain harness, bundled scenarios, and pytest-benchmark microbenchmarks."""
