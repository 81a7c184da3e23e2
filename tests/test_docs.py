"""The documentation is tested: the MkDocs site builds without a warning, every relative link in the
README and docs/ resolves, and the pages hold what the code has (every command, option, clause,
dot-command and error code), with SQL that parses.

The README's own checks (its quick start, its length) are in tests/test_readme.py; the generated
list of accepted SQL in tests/frontend/test_docs_allowlist.py; the owner's how-tos, run verbatim,
in tests/interfaces/test_owner_cli.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from dpgate import codes
from dpgate.frontend import dialect
from dpgate.frontend.settings import SPECS
from dpgate.interfaces import cli

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
# Pages of the site made from files at the root when it is built (mkdocs_hooks.py).
INCLUDED = {DOCS / "index.md": ROOT / "README.md", DOCS / "changelog.md": ROOT / "CHANGELOG.md"}


def page(name: str) -> str:
    path = DOCS / name
    assert path.is_file(), f"docs/{name} is gone: move this test to where its content went"
    return path.read_text()


def docs_text() -> str:
    assert len(PAGES) >= 20, "docs/ has lost its pages"
    return "\n".join(p.read_text() for p in PAGES)


# -- the site --------------------------------------------------------------------------------------
def test_the_site_builds_strictly_without_a_warning(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert "WARNING" not in log and "ERROR" not in log, log
    # The front page is the README and the changes page the CHANGELOG, included when the site is built.
    front = (site / "index.html").read_text()
    assert "Quick start" in front and "pip install . &amp;&amp; dpgate demo" in front
    newest = re.search(r"^- \*\*(\S+)\*\*", (ROOT / "CHANGELOG.md").read_text(), re.M).group(1)
    assert f"<strong>{newest}</strong>" in (site / "changelog" / "index.html").read_text()
    for p in PAGES:
        built = site / p.relative_to(DOCS).with_suffix("") / "index.html"
        assert built.is_file(), p
    # Markdown that GitHub renders but Python-Markdown reads otherwise: a list right under a paragraph
    # (or under an item's second paragraph) becomes text of that paragraph; write a blank line first.
    swallowed = re.compile(r"<p>(?:(?!</p>).)*?\n(?:- |\* |\d+\. )", re.S)
    for built in site.rglob("index.html"):
        html = built.read_text()
        found = swallowed.search(html)
        assert not found, f"{built.relative_to(site)}: a list read as text: {found.group(0)[-120:]!r}"
        assert "\\|" not in html, f"{built.relative_to(site)}: a \\| left in a table cell"


def test_the_site_keeps_one_copy_of_the_readme_and_the_changelog():
    for made, source in INCLUDED.items():
        assert not made.exists(), f"{made.relative_to(ROOT)} is made from {source.name} when the site is built"


# -- links ---------------------------------------------------------------------------------------
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+?)\s*#*$", re.M)


def _prose(text: str) -> str:
    return _CODE.sub("", _FENCE.sub("", text))


def _anchors(path: Path) -> set[str]:
    """The anchors MkDocs gives the headings of a page (Python-Markdown's toc, whose slugs GitHub's match
    for plain headings)."""
    text = _FENCE.sub("", path.read_text())
    titles = [re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", t) for t in _HEADING.findall(text)]
    return {slugify(t, "-") for t in titles}


def _links(path: Path) -> list[str]:
    return [t for t in _LINK.findall(_prose(path.read_text())) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def _resolve(source: Path, target: str) -> tuple[Path, str]:
    file, _, anchor = target.partition("#")
    resolved = (source.parent / file).resolve() if file else source
    return INCLUDED.get(resolved, resolved), anchor


@pytest.mark.parametrize("source", [ROOT / "README.md", *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(source):
    for target in _links(source):
        path, anchor = _resolve(source, target)
        assert path.is_file(), f"{source.name}: {target} is not a file"
        assert path.is_relative_to(ROOT), f"{source.name}: {target} is outside the repository"
        if source != ROOT / "README.md":
            # The site holds docs/ and the included pages only.
            assert path.is_relative_to(DOCS) or path in INCLUDED.values(), f"{source.name}: {target} is not in the site"
        if anchor:
            assert anchor in _anchors(path), f"{source.name}: {target}: no heading has the anchor #{anchor}"


def test_the_links_are_there_to_check():
    readme = _links(ROOT / "README.md")
    assert len(readme) >= 20 and all(t.startswith(("docs/", "CHANGELOG.md")) for t in readme), readme
    assert sum(len(_links(p)) for p in PAGES) >= 40
    assert sum("#" in t for p in PAGES for t in _links(p)) >= 5, "no anchor to check"


# -- what the pages hold ----------------------------------------------------------------------------
def test_every_cli_command_is_documented():
    text = page("command-line.md")
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert len(sub.choices) >= 10
    for name in sub.choices:
        assert f"dpgate {name}" in text, name


CLAUSES = [
    "WITH DIFFERENTIAL_PRIVACY OPTIONS",
    "SET dp_epsilon",
    "SHOW BUDGET",
    "EXPLAIN PRIVACY",
    "SHOW TABLES",
    "DESCRIBE",
]


@pytest.mark.parametrize("clause", CLAUSES)
def test_dp_clauses_are_documented(clause):
    assert clause in page("sql/reference.md")


def test_every_option_is_documented():
    text = page("sql/reference.md")
    assert len(SPECS) >= 10
    for name, spec in SPECS.items():
        assert f"`{name}`" in text or f"dp_{name}" in text, name


def test_every_dot_command_is_documented():
    from dpgate.interfaces.shell.commands import COMMANDS

    text = page("shell.md")
    assert len(COMMANDS) >= 5
    for name in COMMANDS:
        assert f"`{name}" in text, name


def test_the_error_codes_page_is_the_generated_table():
    # dpgate/codes.py is the one table of codes; docs/errors.md holds its output verbatim, under the
    # one-line intro (regenerate with: python -m dpgate.codes). tests/test_error_codes.py checks
    # the table against the raise sites.
    text = page("errors.md")
    intro = "Every error is a PEP 249 class with a stable `.code`, a `.hint` and a `.details` dict:\n\n"
    assert text.count(codes.BEGIN) == 1 and text.count(codes.END) == 1
    assert intro + codes.section() in text, "regenerate docs/errors.md's table with: python -m dpgate.codes"


def _statements(text: str) -> list[str]:
    snippets = re.findall(r"`((?:SELECT|SHOW|SET|EXPLAIN|DESCRIBE)[^`]*)`", text)
    snippets += re.findall(r'cur\.execute\("([^"]+)"\)', text)
    # A clause named in prose ("SELECT ... FROM <table>") is not a statement.
    statements = [s for s in snippets if " FROM " in s or s.startswith(("SET ", "SHOW "))]
    return [s for s in statements if "..." not in s and "<" not in s]


def test_sql_in_the_docs_parses():
    statements = _statements(docs_text())
    assert len(statements) >= 20
    for sql in statements:
        dialect.parse_one(sql)
