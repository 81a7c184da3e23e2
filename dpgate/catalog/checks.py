"""Checks the owner's methods share: switches, counts, a policy table's keys, a table's existence."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dpgate import errors


def main_table_exists(con, name: str) -> bool:
    return bool(con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = ?", [name]
    ).fetchone()[0])  # fmt: skip


def check_positive_int(label: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise errors.PolicyError(f"{label} must be a positive integer, got {value!r}", code="DP312")


def check_flag(where: str, value: Any) -> bool:
    """A true/false switch: only a real boolean (``"false"`` is a non-empty string, so truthy)."""
    if not isinstance(value, bool):
        raise errors.PolicyError(f"{where} must be true or false, got {value!r}", code="DP330")
    return value


def check_keys(where: str, mapping: Any, allowed: Iterable[str]) -> None:
    allowed = set(allowed)
    if not isinstance(mapping, Mapping):
        raise errors.PolicyError(f"{where} must be a table", code="DP330")
    unknown = sorted(set(mapping) - allowed)
    if unknown:
        raise errors.PolicyError(
            f"Unknown key(s) {', '.join(unknown)} in {where}",
            code="DP330",
            hint=f"accepted keys: {', '.join(sorted(allowed))}",
        )
