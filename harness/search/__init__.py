"""Searching for failures: Hypothesis profiles, hunts, long campaigns, the exhaustive scope."""
