"""Grading a class: per check group, pass or fail, and the report files."""
