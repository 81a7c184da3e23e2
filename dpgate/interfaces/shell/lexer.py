"""Syntax highlighting as you type, with sqlglot's tokenizer (no extra dependency)."""

from __future__ import annotations

from prompt_toolkit.document import Document
from prompt_toolkit.lexers import Lexer
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from dpgate.frontend.dialect import DIALECT

DP_WORDS = {"DIFFERENTIAL_PRIVACY", "OPTIONS", "PRIVACY", "BUDGET", "EXPLAIN", "SYNTHETIC", "RELEASES"}
_LITERALS = {TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.RAW_STRING, TokenType.HEREDOC_STRING}


def token_styles(text: str) -> list[tuple[int, int, str]]:
    """(start, end, style class) for each token of ``text``; a token error stops highlighting there."""
    spans: list[tuple[int, int, str]] = []
    tokenizer = DIALECT.tokenizer_class()
    try:
        tokens = tokenizer.tokenize(text)
    except TokenError:
        tokens = tokenizer.tokens
    keywords = set(DIALECT.tokenizer_class.KEYWORDS.values())
    for tok in tokens:
        upper = tok.text.upper()
        if tok.token_type in _LITERALS:
            style = "class:string"
        elif tok.token_type == TokenType.NUMBER:
            style = "class:number"
        elif upper in DP_WORDS or upper.startswith("DP_"):
            style = "class:dp"
        elif tok.token_type in (TokenType.VAR, TokenType.IDENTIFIER):
            style = "class:name"
        elif tok.token_type in keywords or tok.text.isalpha():
            style = "class:keyword"
        else:
            style = "class:operator"
        spans.append((tok.start, tok.end + 1, style))
    return spans


class SQLLexer(Lexer):
    def lex_document(self, document: Document):
        text = document.text
        styles = [""] * len(text)
        for start, end, style in token_styles(text):
            for i in range(max(start, 0), min(end, len(text))):
                styles[i] = style
        # comments are skipped by the tokenizer: colour them from the text
        in_comment = False
        for i, ch in enumerate(text):
            if not in_comment and text.startswith("--", i) and styles[i] == "":
                in_comment = True
            if in_comment:
                if ch == "\n":
                    in_comment = False
                else:
                    styles[i] = "class:comment"
        lines = document.lines
        offsets = []
        pos = 0
        for line in lines:
            offsets.append(pos)
            pos += len(line) + 1

        def get_line(lineno: int):
            start = offsets[lineno]
            line = lines[lineno]
            out = []
            for k, ch in enumerate(line):
                style = styles[start + k] if start + k < len(styles) else ""
                if out and out[-1][0] == style:
                    out[-1] = (style, out[-1][1] + ch)
                else:
                    out.append((style, ch))
            return out

        return get_line
