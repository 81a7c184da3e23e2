"""A floor on the number of collected tests, so that a silently skipped file is noticed."""

from __future__ import annotations

from pathlib import Path

MINIMUM = 300
TESTS = Path(__file__).resolve().parent


def test_enough_tests_are_collected(request):
    args = [Path(a.split("::")[0]).resolve() for a in request.config.args]
    full_run = not args or all(a in (TESTS, TESTS.parent) for a in args)
    n = len(request.session.items)
    assert n >= (MINIMUM if full_run else 1), f"only {n} tests collected"
