"""Unit tests of the benchmarks' own code (metrics, traces, the MT simulation): no models."""
