"""Suite-wide fixtures: which implementation the tests drive."""

from __future__ import annotations

from types import ModuleType

import pytest

import scheduler


@pytest.fixture
def impl() -> ModuleType:
    """The module under test: any module that defines the contract's names."""
    return scheduler
