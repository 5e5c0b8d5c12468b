"""Integrations of the checker with other tools (test runners, benchmark suites)."""
