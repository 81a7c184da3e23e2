"""The catalog imports downward only, and what it needs from above is installed by the package."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import dpgate  # noqa: F401 - installs the owner's hooks
from dpgate.catalog import hooks

CATALOG = Path(__file__).resolve().parents[2] / "dpgate" / "catalog"
ABOVE = ("dpgate.queries", "dpgate.backends", "dpgate.server", "dpgate.interfaces", "dpgate.gateway")


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against dpgate.catalog
                base = ".".join(["dpgate", "catalog"][: 3 - node.level] + ([base] if base else []))
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return found


@pytest.mark.parametrize("path", sorted(CATALOG.glob("*.py")), ids=lambda p: p.name)
def test_the_catalog_imports_no_later_stage(path):
    above = {m for m in _imported(path) for a in ABOVE if m == a or m.startswith(a + ".")}
    assert not above, f"{path.name} imports {sorted(above)}"


@pytest.mark.parametrize("name, protocol", [("spark", hooks.SparkSources), ("release_coding", hooks.ReleaseCoding)])
def test_the_installed_hooks_provide_every_declared_function(name, protocol):
    provided = getattr(hooks, name)()
    declared = [n for n, _ in inspect.getmembers(protocol, inspect.isfunction) if not n.startswith("_")]
    assert declared
    for fn in declared:
        assert callable(getattr(provided, fn, None)), f"{name} hook lacks {fn}"


def test_a_missing_hook_is_an_internal_error(monkeypatch):
    monkeypatch.setattr(hooks, "_providers", {})
    with pytest.raises(dpgate.InternalError, match="not installed"):
        hooks.spark()
