"""The `schedcheck` command line."""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = """\
usage: schedcheck <command> [options]

commands:
  check [PATH]   fuzz a submission file against the P07 spec (not yet available)

The test suite runs with: pytest -n auto
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `schedcheck` console script; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    sys.stderr.write(USAGE)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
