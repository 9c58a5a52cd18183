"""Imports a module that does not exist. Expected: one clear 'could not be loaded' message."""

import numpy_is_not_here  # noqa: F401
