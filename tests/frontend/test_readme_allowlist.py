"""The README's table of accepted SQL is the allowlist itself (generated, kept in step)."""

from __future__ import annotations

from pathlib import Path

from dpgate.frontend import allowlist

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_lists_exactly_the_allowlist():
    text = README.read_text()
    begin = text.index("<!-- allowlist:begin")
    start = text.index("-->", begin) + len("-->\n")
    end = text.index("<!-- allowlist:end -->")
    assert text[start:end].strip() == allowlist.reference_markdown().strip(), (
        "regenerate the README section from dpgate.frontend.allowlist.reference_markdown()"
    )
