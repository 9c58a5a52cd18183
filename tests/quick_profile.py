"""A Hypothesis profile for this checkout's own tests of a whole mode on a correct file:
every stage and every property of `schedcheck check` (or `pytest --impl`) runs, each on 20
examples instead of 200, derandomized and with no database. The default run uses it where a
test checks that a mode passes a correct file and how it says so; `pytest -m costly` runs
the same tests at the mode's own profile. It is not a profile of the product: a student's
PASS always comes from the full one.

Loaded into the mode's own pytest run with PYTEST_ADDOPTS="-p tests.quick_profile" (see
QUICK): a `-p` plugin is imported before Hypothesis's pytest_configure loads the profile
that `--hypothesis-profile` (or `check --profile`) names.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

NAME = "schedcheck-selftest-quick"

settings.register_profile(
    NAME,
    max_examples=20,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
