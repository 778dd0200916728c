"""Benchmarks (`make bench`): figures printed side by side, never pass/fail on time."""
