"""The Hypothesis settings profiles, and where each keeps its counterexamples.

Choose one with `--hypothesis-profile NAME` (in schedcheck's own run only: with `--impl`
or SCHEDCHECK_IMPL, or a checkout's run; schedcheck/plugin.py registers them there and
nowhere else, so that a course's own profiles keep their names):
- schedcheck-dev (default): 200 examples per property, random, counterexamples kept in the
  local directory database (.hypothesis/examples).
- schedcheck-ci: derandomized, no deadline, print_blob: the same examples on every run, a
  regression gate that cannot flake. It never writes a database. Where the environment
  variable CI is set and no profile is named, schedcheck's run loads it instead of
  Hypothesis's own `ci`.
- schedcheck-fuzz: 20,000 examples per property, random, databases as dev: for long hunts.
- schedcheck-grade: what checking a submission uses: derandomized and no database at all,
  so a grade depends on the submission and nothing else.

The names carry a `schedcheck-` prefix because Hypothesis's registry is global: plain `ci`
or `dev` would replace a course's profiles of those names. The old names (`dev`, `ci`,
`fuzz`, `grade`) still select ours for one version, with a deprecation warning
(schedcheck/plugin.py); `schedcheck check --profile` takes both spellings (`prefixed`).

Sharing counterexamples between machines (issue 11): where SCHEDCHECK_REDIS_URL is set
(`redis://host:6379/0`), dev and fuzz keep them in Hypothesis's RedisExampleDatabase too
(multiplexed with the local one), and ci reads Redis through a read-only view: a failure
found on one machine is the first example every other machine replays (Hypothesis's reuse
phase). Keys live under `schedcheck:<namespace>:`, the namespace being the submission's
file name ("reference" for the reference) unless SCHEDCHECK_REDIS_NAMESPACE says otherwise.
Why a namespace: Hypothesis deletes a stored example that no longer fails, so a correct
implementation sharing keys with a buggy one would erase the buggy one's counterexamples.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hypothesis import HealthCheck, settings
from hypothesis.database import ExampleDatabase, MultiplexedDatabase, ReadOnlyDatabase

from schedcheck.drive.loader import REFERENCE

URL = "SCHEDCHECK_REDIS_URL"
NAMESPACE = "SCHEDCHECK_REDIS_NAMESPACE"

PREFIX = "schedcheck-"
DEV, CI, FUZZ, GRADE = "schedcheck-dev", "schedcheck-ci", "schedcheck-fuzz", "schedcheck-grade"
# The names the profiles had up to 0.2, accepted for one more version (the plugin warns).
OLD_NAMES = {name.removeprefix(PREFIX): name for name in (DEV, CI, FUZZ, GRADE)}

GRADE_EXAMPLES = 300  # schedcheck-grade's examples a property: what check and grade try
# One failure a test, shrunk: a scheduler's bugs share one report (the first check to fire,
# whichever it is), and the explicit examples (the regression corpus) stop at the first
# that fails, so a hang is waited for once in full, not once per example (issue 54).
_COMMON: dict[str, Any] = dict(
    deadline=None, suppress_health_check=[HealthCheck.too_slow], report_multiple_bugs=False
)


class DatabaseError(Exception):
    """The shared example database was asked for and cannot be used."""


def prefixed(name: str) -> str:
    """The profile `name` means: a short name (`grade`) is ours (`schedcheck-grade`); any
    other name (a prefixed one, or a profile of the caller's own) stays as it is."""
    return OLD_NAMES.get(name, name)


def namespace(impl: str) -> str:
    """Whose counterexamples these are: SCHEDCHECK_REDIS_NAMESPACE, or the file's name."""
    return os.environ.get(NAMESPACE) or (REFERENCE if impl == REFERENCE else Path(impl).name)


def _shown(url: str) -> str:
    """`url` fit for a log: its password replaced by ***."""
    password = urlsplit(url).password
    return url.replace(f":{password}@", ":***@", 1) if password else url


def redis_database(url: str, space: str) -> ExampleDatabase:
    """Hypothesis's RedisExampleDatabase on `url`, under `schedcheck:<space>:`.

    `url` is a redis:// URL, or just `host:port/db`: an execnet spec (`--tx ...//env:`)
    cuts a value at "//", so that is how the address reaches a remote worker."""
    if "://" not in url:
        url = f"redis://{url}"
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError as e:
        raise DatabaseError(
            f"{URL} is set, but the redis client is not installed ({e}). Install it with "
            "`python -m pip install -e '.[redis]'`, or unset the variable."
        ) from None
    client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=30)
    try:
        client.ping()
    except (redis.RedisError, ValueError) as e:
        raise DatabaseError(
            f"{URL}={_shown(url)}: Redis does not answer ({e}). Start the server, correct the "
            "address, or unset the variable to keep counterexamples on this machine only."
        ) from None
    return RedisExampleDatabase(client, key_prefix=f"schedcheck:{space}:".encode())


def register(impl: str = REFERENCE, url: str | None = None) -> None:
    """(Re)register the four profiles for the implementation `impl`, sharing through the
    Redis at `url` if one is given. Registering the active profile again makes Hypothesis
    reload it, so new databases take effect at once. Raises DatabaseError if that Redis
    cannot be used."""
    local = settings.get_profile("default").database
    shared = redis_database(url, namespace(impl)) if url else None
    keep = local if shared is None or local is None else MultiplexedDatabase(local, shared)
    replay = None if shared is None else ReadOnlyDatabase(shared)
    settings.register_profile(DEV, max_examples=200, database=keep, **_COMMON)
    settings.register_profile(FUZZ, max_examples=20_000, database=keep, **_COMMON)
    ci_settings = settings(
        max_examples=200, derandomize=True, database=None, print_blob=True, **_COMMON
    )
    # Hypothesis refuses derandomize=True and a database in one call: a database it writes
    # would change what the next run tries. A read-only view cannot, so ci keeps its
    # promise (the same generated examples every run) and only adds the shared replays.
    settings.register_profile(CI, parent=ci_settings, database=replay)
    settings.register_profile(
        GRADE,
        max_examples=GRADE_EXAMPLES,
        derandomize=True,
        database=None,
        print_blob=True,
        **_COMMON,
    )
