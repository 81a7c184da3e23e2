"""The documentation's page of accepted SQL (docs/sql/allowed.md) is the allowlist itself (generated, kept in step)."""

from __future__ import annotations

from pathlib import Path

from dpgate.frontend import allowlist

PAGE = Path(__file__).resolve().parents[2] / "docs" / "sql" / "allowed.md"


def test_the_docs_list_exactly_the_allowlist():
    text = PAGE.read_text()
    assert text.count("<!-- allowlist:begin") == 1 and text.count("<!-- allowlist:end -->") == 1
    begin = text.index("<!-- allowlist:begin")
    start = text.index("-->", begin) + len("-->\n")
    end = text.index("<!-- allowlist:end -->")
    listed = text[start:end].strip()
    assert listed, "docs/sql/allowed.md lists nothing between its markers"
    assert listed == allowlist.reference_markdown().strip(), (
        "regenerate docs/sql/allowed.md between its markers from dpgate.frontend.allowlist.reference_markdown()"
    )
