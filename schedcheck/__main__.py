"""`python -m schedcheck`: the same as the `schedcheck` command."""

from schedcheck.cli.main import main

raise SystemExit(main())
