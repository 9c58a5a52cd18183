"""Benchmarks: speed is measured here, never asserted by timed unit tests."""
