"""The benchmark suite: ``python -m bench [--quick]`` (see docs/benchmarks.md)."""
