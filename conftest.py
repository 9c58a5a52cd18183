"""The suite's setup is schedcheck's pytest plugin (harness/pytest_plugin.py): `--impl`, the
Hypothesis profiles, the `impl` fixture, and which failures are verdicts.

Installed (`pip install -e .`), pytest loads the plugin through its entry point before it
reads the command line, which `--impl /any/absolute/path` needs; named here as well, it
also works in a checkout that was not installed.
"""

pytest_plugins = ("harness.pytest_plugin",)
