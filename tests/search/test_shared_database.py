"""Counterexamples shared through Redis (schedcheck/search/profiles.py, docs/scale.md).

A real redis-server from the distribution's packages, on a free loopback port, with no
persistence; separate pytest processes in fresh working directories stand for separate
machines: the only thing they share is that server.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)

from schedcheck.drive.loader import REFERENCE
from schedcheck.search import profiles
from tests.catalogue import standalone
from tests.helpers import ROOT, run_pytest

MUTANT = standalone(ROOT / "tests/mutants/max_tokens_off_by_one.py")
STATEFUL = str(ROOT / "schedcheck/suite/test_state_machine.py")  # the one property with no corpus
OBSERVE = {
    # Hypothesis's record of every test case it ran, and how each was generated.
    "HYPOTHESIS_EXPERIMENTAL_OBSERVABILITY": "1",
    "HYPOTHESIS_EXPERIMENTAL_OBSERVABILITY_NOCOVER": "1",
}


REQUIRE = "SCHEDCHECK_REQUIRE_REDIS"


def _client_missing() -> str | None:
    try:
        import redis  # noqa: F401
    except ImportError:
        return "the redis client is not installed (python -m pip install -e '.[redis]')"
    return None


def _missing() -> str | None:
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (Debian: apt-get install redis-server)"
    return _client_missing()


def _skip_unless_required(missing: str | None) -> None:
    """Skip where the extras are missing: the README's `pytest -n auto` runs without them.
    .ci/run installs them and sets SCHEDCHECK_REQUIRE_REDIS for its `-m redis` step, where
    a missing one fails the test instead of hiding it."""
    if missing is None:
        return
    if os.environ.get(REQUIRE):
        pytest.fail(f"{missing}; {REQUIRE} is set, so this test must run")
    pytest.skip(missing)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of its own on 127.0.0.1, nothing saved to disk, stopped afterwards."""
    _skip_unless_required(_missing())
    import redis

    folder = tmp_path_factory.mktemp("redis")
    for _ in range(5):  # the free port can be taken before the server binds it
        port = _free_port()
        server = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(folder),
                "--protected-mode",
                "yes",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=port, socket_connect_timeout=1)
        for _ in range(100):
            if server.poll() is not None:
                break
            try:
                client.ping()
            except redis.ConnectionError:
                time.sleep(0.05)
                continue
            try:
                yield f"redis://127.0.0.1:{port}/0"
            finally:
                server.terminate()
                server.wait(timeout=10)
            return
        server.kill()
        server.wait(timeout=10)
    pytest.fail("redis-server did not start on a free loopback port in 5 tries")


def _contents(url: str) -> dict[Any, Any]:
    import redis

    client = redis.Redis.from_url(url)
    return {key: client.smembers(key) for key in client.keys("schedcheck:*")}


def _test_cases(cwd: Path) -> list[dict[str, Any]]:
    """The test cases one pytest process ran, in order (Hypothesis's observability)."""
    lines = [
        json.loads(line)
        for path in sorted((cwd / ".hypothesis" / "observed").glob("*testcases.jsonl"))
        for line in path.read_text().splitlines()
    ]
    return [case for case in lines if case["type"] == "test_case"]


def _machine(tmp_path: Path, name: str, url: str, profile: str) -> list[dict[str, Any]]:
    """Run the stateful property against the mutant as if on another machine: a fresh
    working directory (so an empty local database) and its own random seed (Hypothesis
    draws one per process unless derandomized; `--hypothesis-seed` would turn every
    database off). Return its test cases."""
    cwd = tmp_path / name
    cwd.mkdir()
    done = run_pytest(
        STATEFUL,
        "-n",
        "0",
        "--impl",
        str(MUTANT),
        "--hypothesis-profile",
        profile,
        cwd=cwd,
        env={**OBSERVE, profiles.URL: url},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "A1 at step" in done.stdout, done.stdout  # the mutant's bug, as catalogued
    return _test_cases(cwd)


@pytest.mark.redis
def test_a_failure_found_on_one_machine_is_the_first_example_on_the_next(
    redis_url: str, tmp_path: Path
) -> None:
    first = _machine(tmp_path, "one", redis_url, profiles.DEV)
    assert first[0]["how_generated"] == "during generate phase"  # nothing to replay yet
    stored = _contents(redis_url)
    assert any(key.startswith(b"schedcheck:max_tokens_off_by_one.py:") for key in stored)

    second = _machine(tmp_path, "two", redis_url, profiles.DEV)
    assert (second[0]["how_generated"], second[0]["status"]) == ("during reuse phase", "failed")

    # ci replays the same counterexample first, and writes nothing.
    before = _contents(redis_url)
    gate = _machine(tmp_path, "gate", redis_url, profiles.CI)
    assert (gate[0]["how_generated"], gate[0]["status"]) == ("during reuse phase", "failed")
    assert _contents(redis_url) == before


@pytest.fixture
def restore_profiles(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests below re-register the profiles in this process; put back what conftest set."""
    current = settings.get_current_profile_name()
    yield
    profiles.register(request.config.getoption("--impl"), os.environ.get(profiles.URL))
    settings.load_profile(current)


@pytest.mark.redis
def test_profiles_share_through_redis_only_when_asked(
    redis_url: str, restore_profiles: None
) -> None:
    profiles.register(str(MUTANT), None)
    assert isinstance(settings.get_profile(profiles.DEV).database, DirectoryBasedExampleDatabase)
    assert settings.get_profile(profiles.CI).database is None

    profiles.register(str(MUTANT), redis_url)
    for name in (profiles.DEV, profiles.FUZZ):
        assert isinstance(settings.get_profile(name).database, MultiplexedDatabase)
    profiles.register(str(MUTANT), redis_url.removeprefix("redis://"))  # as --tx env: gives it
    assert isinstance(settings.get_profile(profiles.DEV).database, MultiplexedDatabase)
    ci = settings.get_profile(profiles.CI)
    assert ci.derandomize and isinstance(ci.database, ReadOnlyDatabase)
    assert settings.get_profile(profiles.GRADE).database is None  # a grade depends on nothing else


@pytest.mark.redis
def test_an_unreachable_redis_is_one_clear_error(restore_profiles: None) -> None:
    _skip_unless_required(_client_missing())
    port = _free_port()
    with pytest.raises(profiles.DatabaseError) as error:
        profiles.register(REFERENCE, f"redis://:hunter2@127.0.0.1:{port}/0")
    shown = f"SCHEDCHECK_REDIS_URL=redis://:***@127.0.0.1:{port}/0: Redis does not answer"
    assert str(error.value).startswith(shown)
    assert "hunter2" not in str(error.value)  # the message lands in CI logs


def test_a_missing_client_is_one_clear_error(
    restore_profiles: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the [redis] extra (the README's plain install), the variable set."""
    monkeypatch.setitem(sys.modules, "redis", None)  # `import redis` raises ImportError
    with pytest.raises(profiles.DatabaseError) as error:
        profiles.register(REFERENCE, "redis://:hunter2@127.0.0.1:6379/0")
    message = str(error.value)
    assert message.startswith("SCHEDCHECK_REDIS_URL is set, but the redis client is not installed")
    assert "pip install -e '.[redis]'" in message and "hunter2" not in message


def test_each_implementation_has_a_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    """A correct implementation deletes stored examples that pass; sharing keys with a
    buggy one would erase its counterexamples."""
    monkeypatch.delenv(profiles.NAMESPACE, raising=False)
    assert profiles.namespace(REFERENCE) == "reference"
    assert profiles.namespace(str(MUTANT)) == "max_tokens_off_by_one.py"
    monkeypatch.setenv(profiles.NAMESPACE, "alice")
    assert profiles.namespace(str(MUTANT)) == "alice"
