"""`python -m schedcheck`: the same as the `schedcheck` command."""

from schedcheck.cli import main

raise SystemExit(main())
