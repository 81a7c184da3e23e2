"""Tables that fit a terminal: display widths, word wrapping, column widths, expanded records.

Shared by the CLI and the shell through ``render``. With no width (a pipe, a file, ``--wide``)
a table prints at its natural width, as it always has. With a width, a table that is too wide
first wraps its long text cells within their columns (at word boundaries; a number is never
wrapped or cut), and when even that cannot fit, or would take more lines than one record per
block, it prints as psql's expanded display (``-[ RECORD 1 ]``, ``\\x``). Widths are display
widths (``prompt_toolkit.utils.get_cwidth``, wcwidth's), so CJK and emoji columns line up.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: The settings of the expanded display, psql's ``\x``: ``auto`` only when a table cannot fit.
EXPANDED = ("auto", "on", "off")
#: A text column is not narrowed below this (unless it is narrower anyway), nor below its longest
#: word up to ``_WORD``: below it, words break.
MIN_TEXT = 10
_WORD = 16
#: Characters after which a word too long for its line may break (identifiers, paths, lists).
_SOFT = "_-/.,:;)"
#: A noisy cell, ``value [low, high]``: the value and its interval never break inside.
_NOISY = re.compile(r"^(\S+) (\[[^\]]*\])$")


def display_width(text: str) -> int:
    """Columns ``text`` takes on a terminal: two for CJK and emoji, none for combining marks."""
    if text.isascii():
        return len(text)
    from prompt_toolkit.utils import get_cwidth  # only for non-ASCII text: it costs an import

    return get_cwidth(text)


def pad(text: str, width: int, right: bool = False) -> str:
    """``text`` padded with spaces to ``width`` display columns (on the left when ``right``)."""
    fill = " " * max(width - display_width(text), 0)
    return fill + text if right else text + fill


def _cut(word: str, width: int) -> int:
    """How many characters of ``word`` fit in ``width`` columns (at least one, so lines advance)."""
    if word.isascii():
        return max(min(width, len(word)), 1)
    used = 0
    for i, ch in enumerate(word):
        used += display_width(ch)
        if used > width:
            return max(i, 1)
    return len(word)


def _break_word(word: str, width: int) -> list[str]:
    """A word wider than ``width``, in pieces: after a ``_SOFT`` character where one falls in the
    second half of the line, else wherever the width ends."""
    pieces = []
    while display_width(word) > width:
        n = _cut(word, width)
        soft = max(word.rfind(c, 0, n) for c in _SOFT) + 1
        if soft >= max(n // 2, 1):
            n = soft
        pieces.append(word[:n])
        word = word[n:]
    return pieces + [word]


def wrap(text: str, width: int, numeric: bool = False) -> list[str]:
    """``text`` in lines of at most ``width`` columns: at spaces, a word longer than a line broken
    (``_break_word``), and at the text's own line breaks. A number is never broken: a noisy cell
    may put its interval under its value, nothing more (those lines may be wider than ``width``)."""
    if "\n" in text:
        return [line for part in text.split("\n") for line in wrap(part, width, numeric)]
    if display_width(text) <= width:
        return [text]
    if numeric:
        m = _NOISY.match(text)
        return [m.group(1), m.group(2)] if m else [text]
    lines: list[str] = []
    line = None
    for word in text.split(" "):
        if line is not None and display_width(line) + 1 + display_width(word) <= width:
            line += " " + word
            continue
        if line is not None:
            lines.append(line.rstrip(" ") or line)
        pieces = _break_word(word, width) if display_width(word) > width else [word]
        lines += pieces[:-1]
        line = pieces[-1]
    lines.append(line or "")
    return lines


def unbreakable(text: str, numeric: bool) -> int:
    """The narrowest a cell can be: a number's (or noisy value's) widest part; text can break anywhere."""
    if not numeric:
        return 1
    parts = [p for line in text.split("\n") for p in (_NOISY.match(line).groups() if _NOISY.match(line) else (line,))]
    return max((display_width(p) for p in parts), default=0)


def _longest_piece(text: str) -> int:
    """The widest piece of ``text`` when it breaks only after spaces and ``_SOFT`` characters: below
    that width a word is cut where it happens to end."""
    return max((display_width(p) for p in re.split(r"(?<=[ _\-/.,:;)\n])", text) if p), default=0)


def wrap_footer(line: str, width: int | None, indent: str = "  ") -> list[str]:
    """A status line or note within ``width``: broken between its `` · `` parts where it can, then
    at spaces; lines after the first indented, so that a wrapped note reads as one."""
    if width is None or display_width(line) <= width:
        return [line]
    out: list[str] = []
    for part in line.split(" · "):
        if out and display_width(out[-1]) + 3 + display_width(part) <= width:
            out[-1] += " · " + part
            continue
        for piece in wrap(part, max(width - len(indent), 1)):
            out.append((indent if out else "") + piece)
    return out


def wrap_lines(text: str, width: int | None, indent: str = "") -> str:
    """Every line of ``text`` within ``width`` (None: as it is), keeping its own indentation;
    continuation lines get ``indent`` more."""
    if width is None:
        return text
    out: list[str] = []
    for line in text.split("\n"):
        if display_width(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip(" "))]
        if len(lead + indent) > width // 2:  # a deep indent would leave no room for the words
            lead = ""
        hang = lead + indent
        for k, piece in enumerate(wrap(line.lstrip(" "), max(width - len(hang), 1))):
            out.append((lead if k == 0 else hang) + piece)
    return "\n".join(out)


# -- tables ------------------------------------------------------------------------------------


def _border(widths: Sequence[int]) -> int:
    return sum(w + 3 for w in widths) + 1


def fit_widths(names: list[str], rows: list[list[str]], numeric: list[bool], max_width: int) -> tuple[list[int], bool]:
    """Column widths for a table within ``max_width``, and whether it fits.

    A number column keeps its numbers whole (only its header wraps); a text column may go down to
    ``MIN_TEXT``. When those least widths do not fit (too many columns) they are the answer, with
    False. Else the widest column narrows first, and then ``_fewer_lines`` shares the room out.
    """
    n = len(names)
    natural, least = [0] * n, [0] * n
    for r in rows:
        for j, c in enumerate(r):
            w = max(display_width(line) for line in c.split("\n"))
            natural[j] = max(natural[j], w)
            if numeric[j]:
                least[j] = max(least[j], unbreakable(c, True))
            elif w > least[j] and least[j] < _WORD:  # keep words up to _WORD whole
                least[j] = max(least[j], min(_longest_piece(c), _WORD))
    for j, name in enumerate(names):
        head = max(display_width(line) for line in name.split("\n"))
        natural[j] = max(natural[j], head)
        if numeric[j]:
            least[j] = max(least[j], min(_longest_piece(name), head))
        else:  # a header's words stay whole
            least[j] = min(natural[j], max(MIN_TEXT, least[j], _longest_piece(name)))
    if _border(least) > max_width:
        return least, False
    cap = max(max_width - 4, 1)  # no column is wider than the screen
    widths = [max(min(w, cap), m) for w, m in zip(natural, least)]
    excess = _border(widths) - max_width
    while excess > 0:  # first the widest column gives, down to the next widest (balanced widths)
        j = max((k for k in range(n) if widths[k] > least[k]), key=lambda k: widths[k])
        widths[j] -= 1
        excess -= 1
    return _fewer_lines(names, rows, numeric, widths, least, [min(w, cap) for w in natural]), True


def _fewer_lines(names: list[str], rows: list[list[str]], numeric: list[bool], widths: list[int],
                 least: list[int], most: list[int]) -> list[int]:  # fmt: skip
    """``widths`` with room moved between columns while that makes the table shorter: the names of
    a column of short labels may take two lines so that a column of long notes takes three, not six.
    A word cut in the middle counts as a line more; between layouts as tall, the one with fewer
    wrapped cells wins. Weighs the first ``_SAMPLE`` rows and stops after
    ``_TRIES`` layouts, so a big result stays quick."""
    sample = [names, *rows[:_SAMPLE]]
    pieces = [[_longest_piece(r[j]) for r in sample] for j in range(len(names))]
    heights: dict[tuple[int, int], tuple[list[int], int]] = {}

    def height(j: int, w: int) -> tuple[list[int], int]:
        if (j, w) not in heights:
            column = [wrap(names[j], w), *_column_lines([r[j] for r in sample[1:]], w, numeric[j])]
            heights[j, w] = [len(c) for c in column], sum(p > w for p in pieces[j])
        return heights[j, w]

    def lines(ws: list[int]) -> tuple[int, int]:
        """The table's lines (a cut word counts as one more), then all its cells' (fewer wrapped cells)."""
        columns = [height(j, w) for j, w in enumerate(ws)]
        rows_ = sum(max(h) for h in zip(*(c[0] for c in columns))) + sum(c[1] for c in columns)
        return rows_, sum(sum(c[0]) for c in columns)

    movable = [j for j in range(len(widths)) if most[j] > least[j]]
    best, tries = lines(widths), 0
    while tries < _TRIES:
        move = None
        for a in movable:
            for b in movable:
                for d in (1, 2, 4, 8, 16, 32):
                    if a == b or widths[a] - d < least[a] or widths[b] + d > most[b]:
                        break
                    trial = list(widths)
                    trial[a] -= d
                    trial[b] += d
                    tries += 1
                    cost = lines(trial)
                    if cost < best:
                        best, move = cost, trial
        if move is None:
            return widths
        widths = move
    return widths


#: How much taller than the expanded display a wrapped table may be before ``auto`` prefers records.
_TALLER = 1.5
#: How many rows ``fit_widths`` weighs, and how many layouts it tries: enough to see a column's
#: shape, few enough to stay quick.
_SAMPLE = 50
_TRIES = 2000


def _column_lines(cells: list[str], width: int, numeric: bool) -> list[list[str]]:
    """A column's cells in lines of ``width``. In a number column too narrow for one of its noisy
    cells, every noisy cell puts its interval under its value, so that the column reads one way."""
    if numeric and any(display_width(c) > width for c in cells):
        width = 0
    return [wrap(c, width, numeric) for c in cells]


def _draw(names: list[str], rows: list[list[str]], widths: list[int], numeric: list[bool]) -> list[str]:
    """The table's lines: a rule, the header, a rule, the rows (a rule between them when one wraps).
    Each column is as wide as its widest line once wrapped, which may be less than ``widths``."""
    columns = [_column_lines([r[j] for r in rows], w, num) for j, (w, num) in enumerate(zip(widths, numeric))]
    header = [wrap(n, w) for n, w in zip(names, widths)]
    widths = [max(display_width(line) for c in [h, *col] for line in c) for h, col in zip(header, columns)]
    sep = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def lines(cells_: list[list[str]], right: list[bool]) -> list[str]:
        out = []
        for k in range(max((len(c) for c in cells_), default=1)):
            parts = [" " + pad(c[k] if k < len(c) else "", w, r) + " " for c, w, r in zip(cells_, widths, right)]
            out.append("|" + "|".join(parts) + "|")
        return out

    body = [lines([c[i] for c in columns], numeric) for i in range(len(rows))]
    out = [sep, *lines(header, [False] * len(names)), sep]
    split = any(len(b) > 1 for b in body)
    for i, b in enumerate(body):
        if split and i:
            out.append(sep)
        out += b
    out.append(sep)
    return out


def format_table(names: list[str], rows: list[list[str]], numeric: list[bool] | None = None,
                 max_width: int | None = None, expanded: str = "auto") -> str:  # fmt: skip
    """An aligned ASCII table in the style of the DuckDB / psql shells, fitted to ``max_width``.

    ``expanded``: ``on`` prints one record per block (``format_records``); ``off`` always a table
    (wrapped as far as it goes, wider than ``max_width`` only when its columns cannot fit);
    ``auto`` a table when it fits, wrapped or not, and records when it cannot fit or when its
    wrapped cells make it taller than the records would be. Without ``max_width`` nothing is
    wrapped and ``auto`` is a table: the output of a pipe or a file stays what scripts parse.
    """
    numeric = list(numeric or [False] * len(names))
    if expanded == "on" and rows:
        return format_records(names, rows, max_width, numeric)
    natural = [max(display_width(line) for c in [n, *(r[j] for r in rows)] for line in c.split("\n"))
               for j, n in enumerate(names)]  # fmt: skip
    if max_width is None or _border(natural) <= max_width:
        return "\n".join(_draw(names, rows, natural, numeric))
    widths, fits = fit_widths(names, rows, numeric, max_width)
    if not rows and not fits and expanded != "off":  # no record to show: the names, in the width
        return wrap_lines(f"(no rows) columns: {', '.join(names)}", max_width, "  ")
    if expanded == "auto" and rows:
        sample = rows[:_SAMPLE]  # enough to compare the two, quick for a big result
        if not fits or len(_draw(names, sample, widths, numeric)) > _TALLER * len(
                _records(names, sample, max_width, numeric)):  # fmt: skip
            return format_records(names, rows, max_width, numeric)
    return "\n".join(_draw(names, rows, widths, numeric))


def format_records(names: list[str], rows: list[list[str]], max_width: int | None = None,
                   numeric: list[bool] | None = None) -> str:  # fmt: skip
    """psql's expanded display: each row a ``-[ RECORD n ]`` block of ``column | value`` lines.

    Values wrap within ``max_width``; so do column names longer than a third of it. A number is
    never broken: when one is wider than the room beside the names, the names give way.
    """
    return "\n".join(_records(names, rows, max_width, list(numeric or [False] * len(names))))


def _records(names: list[str], rows: list[list[str]], max_width: int | None, numeric: list[bool]) -> list[str]:
    label = max((display_width(n) for n in names), default=0)
    room = None
    if max_width is not None:
        label = min(label, max(max_width - 3 - 20, (max_width - 3) // 3, 1))
        widest = max((unbreakable(c, True) for r in rows for c, num in zip(r, numeric) if num), default=0)
        if widest > max_width - 3 - label and max_width - 3 - widest >= min(label, 4):
            label = max_width - 3 - widest  # the names give way, if that is enough for the number
        room = max(max_width - 3 - label, 1)
    blocks = []
    value_width = 0
    for r in rows:
        fields = []
        for name, v, num in zip(names, r, numeric):
            values = wrap(v, room, num) if room is not None else v.split("\n")
            labels = wrap(name, label) if room is not None else [name]
            value_width = max([value_width, *(display_width(x) for x in values)])
            fields.append((labels, values))
        blocks.append(fields)
    if max_width is not None:  # a number wider than the screen does not widen every rule
        value_width = min(value_width, max(max_width - 3 - label, 0))
    out = []
    for i, fields in enumerate(blocks, 1):
        head = f"-[ RECORD {i} ]"
        if len(head) <= label + 1:
            out.append(head + "-" * (label + 1 - len(head)) + "+" + "-" * (value_width + 1))
        else:
            out.append(head + "-" * max(label + 3 + value_width - len(head), 0))
        for labels, values in fields:
            for k in range(max(len(labels), len(values))):
                lab = labels[k] if k < len(labels) else ""
                val = values[k] if k < len(values) else ""
                out.append(f"{pad(lab, label)} | {val}".rstrip())
    return out
