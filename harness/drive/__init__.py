"""Driving one implementation: load it, check its contract, run a workload into a trace."""
