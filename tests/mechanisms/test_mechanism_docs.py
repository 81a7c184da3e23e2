"""Every mechanism module states its proof's terms: guarantee, neighbouring relation, sensitivity.

That mechanisms import nothing above them (not even inside a function) is ``tests/test_layout.py``'s
stage check.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dpgate"
MODULES = sorted(p for p in (PACKAGE / "mechanisms").glob("*.py"))


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
