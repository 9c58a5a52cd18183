"""Verdicts: the checks on one workload, and the report a student reads (text, HTML)."""
