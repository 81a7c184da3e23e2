"""Mechanisms import downward only: never a stage above them, not even inside a function.

A mechanism is maths over arrays with its proof; plans, query classes, the catalog, backends and
the interfaces build on it. An upward import (even a lazy one) would let a mechanism depend on
how a query is planned or answered, and hides cycles from the layout test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dpgate"
ABOVE = ("dpgate.queries", "dpgate.plans", "dpgate.catalog", "dpgate.backends", "dpgate.server",
         "dpgate.interfaces", "dpgate.gateway", "dpgate.ledger", "dpgate.frontend", "dpgate.release")  # fmt: skip
MODULES = sorted(p for p in (PACKAGE / "mechanisms").glob("*.py"))


def _imported(path: Path) -> set[str]:
    """Every module a file names in an import, at any depth (functions, TYPE_CHECKING blocks)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: inside dpgate.mechanisms
                base = "dpgate.mechanisms" + (f".{base}" if base else "")
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_a_mechanism_imports_nothing_above_it(path):
    upward = sorted(m for m in _imported(path) for a in ABOVE if m == a or m.startswith(a + "."))
    assert not upward, f"{path.name} imports {upward}"


def test_the_check_sees_function_level_and_aliased_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from dpgate.plans import ExactAnswer\n    from dpgate import gateway\n")
    assert {"dpgate.plans.ExactAnswer", "dpgate.gateway"} <= _imported(probe)


def test_noise_imports_no_mechanism():
    """``noise`` is below the mechanisms: the samplers they all draw from."""
    used = _imported(PACKAGE / "noise.py")
    assert not {m for m in used if m.startswith("dpgate.") and m not in ("dpgate.errors",)}, used


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_every_mechanism_module_states_its_guarantee(path):
    """A module that releases noisy values states its guarantee, neighbours and sensitivity."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    if path.stem in ("__init__", "base"):
        assert doc
        return
    assert "**Guarantee" in doc, f"{path.name} has no Guarantee heading"
    assert "sensitiv" in doc.lower(), f"{path.name} does not state its sensitivity"
    assert "neighbour" in doc.lower(), f"{path.name} does not state its neighbouring relation"
