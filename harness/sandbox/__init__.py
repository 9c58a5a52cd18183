"""Isolation: the submission runs in a worker process it cannot escape; the parent decides."""
