"""The properties every implementation is checked against, as pytest tests: the spec's
worked examples, the invariants and the differential and lockstep properties on random
workloads, and the stateful test. `schedcheck check` runs them phase by phase, and the
pytest plugin (`pytest --impl FILE`) adds them to a course's own test run.

They drive whatever the `impl` fixture gives (schedcheck/plugin.py): the reference by
default, a submission in its box with `--impl`. `regressions/` holds the counterexamples
every run replays first.
"""
