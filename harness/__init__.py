"""How an implementation is loaded and run: the driver, the reports, the `schedcheck` command."""
