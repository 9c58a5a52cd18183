"""schedcheck: property-based verification of LLM-serving schedulers (P07).

What a user runs: the `schedcheck` command (`schedcheck.cli`, also `python -m schedcheck`)
and the pytest plugin (`schedcheck.plugin`, registered through pytest's entry point). The
rest is in the rooms beside it in a checkout: `scheduler` (what is right), `invariants`
(what must hold), `strategies` (what to try), `harness` (how an implementation is loaded
and run), `suite` (the properties, as pytest tests). Installed from a wheel, those rooms
are inside this package (setup.py, harness/layout.py).
"""

__version__ = "0.2.0"
