"""Locate files shipped with dpgate: the schema DDL in ``sql/`` and the example data.

In a wheel they are force-included as ``dpgate/_sql`` and ``dpgate/_data``; in a source
checkout (or an editable install) they are read from the repository's ``sql/`` and
``examples/data/``.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _find(installed: str, checkout: str) -> Path:
    for candidate in (_PACKAGE / installed, _PACKAGE.parent / checkout):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"dpgate resource directory not found: {installed} or {checkout}")


def sql_dir() -> Path:
    return _find("_sql", "sql")


def data_dir() -> Path:
    return _find("_data", "examples/data")


def read_sql(name: str) -> str:
    return (sql_dir() / name).read_text(encoding="utf-8")
