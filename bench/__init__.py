"""Benchmarks: run by hand, never part of the test suite (see bench/README.md)."""
