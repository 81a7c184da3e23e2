"""Comments say why, not who found it: no comment or docstring in dpgate/ or tests/ cites a
reviewer's label (``helper-<n>``, "red team") in place of the reason the code is as it is."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABEL = re.compile(r"helper-\d+|red[ -]teams?\b", re.IGNORECASE)


def _texts(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of ``source``."""
    out = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
           if t.type == tokenize.COMMENT]  # fmt: skip
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                out.append((node.body[0].lineno, doc))
    return out


def _labels(source: str) -> list[tuple[int, str]]:
    return [(line, m.group(0)) for line, text in _texts(source) for m in LABEL.finditer(text)]


def test_no_comment_cites_a_reviewers_label():
    me = Path(__file__).resolve()
    found = [f"{path.relative_to(ROOT)}:{line}: {label}"
             for folder in ("dpgate", "tests") for path in sorted((ROOT / folder).rglob("*.py")) if path.resolve() != me
             for line, label in _labels(path.read_text(encoding="utf-8"))]  # fmt: skip
    assert not found, "say why instead:\n" + "\n".join(found)


def test_the_check_finds_a_label_in_a_comment_and_a_docstring():
    source = 'def f():\n    """Refused before the debit (red team helper-42)."""\n    return 1  # (helper-40)\n'
    assert _labels(source) == [(3, "helper-40"), (2, "red team"), (2, "helper-42")]
    assert _labels("x = 'helper-1'  # a string, not a comment\n") == []
