"""MkDocs hooks (``hooks:`` in mkdocs.yml): the pages kept outside ``docs/``, and one fix of the Markdown.

- The front page is README.md and the changes page is CHANGELOG.md, both at the repository's root
  and kept in one copy there: they become the site's ``index.md`` and ``changelog.md`` when it is
  built. The README's links into the documentation (``docs/...``) and to the changelog are made
  relative to the site.
- GitHub needs ``\\|`` for a pipe inside a code span in a table cell; Python-Markdown keeps the
  backslash there (it already reads code spans before it splits the cells), so it is dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent

# (the page in the site, the file at the root)
INCLUDED = {"index.md": "README.md", "changelog.md": "CHANGELOG.md"}


def readme_for_site(text: str) -> str:
    """README.md as the site's front page: its links into docs/ and to CHANGELOG.md made relative to the site."""
    text = re.sub(r"\]\(docs/", "](", text)
    return re.sub(r"\]\(CHANGELOG\.md\)", "](changelog.md)", text)


def on_files(files: Files, config) -> Files:
    for page, source in INCLUDED.items():
        if files.get_file_from_path(page) is not None:
            raise ValueError(f"docs/{page} is made from {source} when the site is built; remove docs/{page}")
        text = (ROOT / source).read_text(encoding="utf-8")
        if source == "README.md":
            text = readme_for_site(text)
        files.append(File.generated(config, page, content=text))
    return files


_CODE_SPAN = re.compile(r"`[^`\n]*`")


def on_page_markdown(markdown: str, page, config, files) -> str:
    lines = markdown.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith("|"):
            lines[i] = _CODE_SPAN.sub(lambda m: m.group(0).replace("\\|", "|"), line)
    return "\n".join(lines)
