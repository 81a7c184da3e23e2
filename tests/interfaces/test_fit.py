"""The table printer at terminal widths 40, 80, 100 and 200: it wraps, goes expanded, or leaves alone."""

from __future__ import annotations

import re

import pytest

from dpgate.interfaces.fit import display_width, format_records, format_table, wrap, wrap_footer
from dpgate.interfaces.render import cells, format_result

WIDTHS = (40, 80, 100, 200)
LONG = ("Privacy budgets are spent per subject, so an answer is about the people who still have budget "
        "left; the population line says who they are and the notes say who was left out, and why.")  # fmt: skip


def _widths(text: str) -> list[int]:
    return [display_width(line) for line in text.splitlines()]


def _words(text: str) -> str:
    """The words of a table's first text column, read down the rows (its wrapped lines joined)."""
    return " ".join(line.split("|")[2].strip() for line in text.splitlines() if line.startswith("|"))


@pytest.mark.parametrize("width", WIDTHS)
def test_a_narrow_table_is_unchanged(width):
    names, rows = ["sex", "n"], [["Female", "10771"], ["Male", "21799"]]
    assert format_table(names, rows, [False, True], max_width=width) == format_table(names, rows, [False, True])
    assert format_table(names, rows, [False, True], max_width=width).splitlines()[0] == "+--------+-------+"


@pytest.mark.parametrize("width", WIDTHS)
def test_a_long_text_cell_wraps_within_its_column(width):
    names, rows = ["id", "note", "n"], [["1", LONG, "123456789012"], ["2", "short", "7"]]
    text = format_table(names, rows, [True, False, True], max_width=width)
    assert max(_widths(text)) <= width
    assert text.startswith("+--"), "one long cell is no reason for the expanded display"
    assert _words(text).split() == ["note", *LONG.split(), "short"], "every word, whole and in order"
    assert "123456789012" in text, "a number keeps its whole width"
    if width < 200:
        lines = text.splitlines()
        assert len([line for line in lines if re.match(r"\|\s+1 \|", line)]) == 1
        assert any(re.match(r"\|\s+\| \w", line) for line in lines), "the row's further lines leave id empty"


@pytest.mark.parametrize("width", WIDTHS)
def test_a_table_with_many_columns_goes_expanded(width):
    names = [f"measure_{k}_{'x' * k}" for k in range(12)]
    rows = [[str(1000 * k + i) for k in range(12)] for i in range(3)]
    text = format_table(names, rows, [True] * 12, max_width=width)
    assert max(_widths(text)) <= width
    if width < 200:
        assert text.startswith("-[ RECORD 1 ]") and text.count("-[ RECORD") == 3
        assert "measure_0_ | 0" in text or "measure_0_" in text.splitlines()[1]
    else:
        assert text.startswith("+--"), "it fits in 200 columns: a table"
    on = format_table(names, rows, [True] * 12, max_width=width, expanded="on")
    off = format_table(names, rows, [True] * 12, max_width=width, expanded="off")
    assert on.startswith("-[ RECORD 1 ]") and off.startswith("+--")
    if width < 200:  # numbers are never cut, so the table cannot fit: off says so by being wider
        assert max(_widths(off)) > width


def test_expanded_on_and_off_for_a_narrow_table():
    names, rows = ["sex", "n"], [["Female", "10771"], ["Male", "21799"]]
    on = format_table(names, rows, [False, True], max_width=80, expanded="on")
    assert on.splitlines() == ["-[ RECORD 1 ]", "sex | Female", "n   | 10771",
                               "-[ RECORD 2 ]", "sex | Male", "n   | 21799"]  # fmt: skip
    assert format_table(names, rows, [False, True], expanded="on") == on, "on needs no width"
    assert format_table(names, rows, [False, True], max_width=80, expanded="off") == format_table(names, rows)


def test_noisy_values_keep_value_and_interval_whole():
    names = ["education", "n", "age"]
    rows = [["Some-college", "7290 [7272, 7308]", "35.756 [35.4255, 36.0826]"], ["9th", "516 [498, 534]", "41 [36, 45]"]]
    assert format_table(names, rows, [False, True, True], max_width=40).startswith("-[ RECORD 1 ]")
    text = format_table(names, rows, [False, True, True], max_width=52)
    assert max(_widths(text)) <= 52 and text.startswith("+--")
    for token in ("7290", "[7272, 7308]", "35.756", "[35.4255, 36.0826]", "516", "[498, 534]", "[36, 45]"):
        assert token in text, token
    assert "| 41 |" not in text and re.search(r"\|\s+41 \|", text), "a column reads one way: value, then interval"


@pytest.mark.parametrize("width", (40, 60))
def test_wide_characters_line_up(width):
    names = ["説明", "population", "note"]
    rows = [["東京都は日本の首都であり、世界最大級の都市圏を形成している。人口は約千四百万人。", "13960000", "Tokyo 🗼 tower"],
            ["Zürich café", "421878", "e\u0301cole"]]  # fmt: skip
    text = format_table(names, rows, [False, True, False], max_width=width)
    widths = _widths(text)
    assert max(widths) <= width
    if text.startswith("+"):
        assert len(set(widths)) == 1, "every line of a table is as wide on the screen"
    assert "13960000" in text and "人口は約千四百万人" in text.replace("\n", "").replace(" | ", "").replace("|", "")


def test_a_number_wider_than_the_screen_is_the_only_overflow():
    big = "1" * 50
    text = format_table(["label", "value", "note"], [["a", big, LONG]], [False, True, False], max_width=40)
    assert text.startswith("-[ RECORD 1 ]") and big in text
    over = [line for line in text.splitlines() if display_width(line) > 40]
    assert over == [f"value | {big}"], "only the line of the unbreakable number is wider"


def test_wrap_breaks_at_words_then_after_punctuation():
    assert wrap("alpha beta gamma", 11) == ["alpha beta", "gamma"]
    assert wrap("baskets (basket_flags, baskets): remaining", 12) == ["baskets", "(basket_", "flags,", "baskets):", "remaining"]
    assert wrap("epsilon_remaining", 9) == ["epsilon_", "remaining"]
    assert wrap("aaaaaaaaaaaaaaaaaaaa", 8) == ["aaaaaaaa", "aaaaaaaa", "aaaa"]
    assert wrap("939 [921, 957]", 5, numeric=True) == ["939", "[921, 957]"]
    assert wrap("123456789", 3, numeric=True) == ["123456789"], "a number is never broken"
    assert wrap("one\ntwo three", 5) == ["one", "two", "three"]


def test_the_footer_wraps_with_its_parts_together():
    line = "16 rows · ε charged 0.5 · remaining ε 9.5 · 95% intervals · discrete Laplace"
    assert wrap_footer(line, None) == [line] and wrap_footer(line, 200) == [line]
    assert wrap_footer(line, 40) == ["16 rows · ε charged 0.5", "  remaining ε 9.5 · 95% intervals", "  discrete Laplace"]
    note = "note: 100 people have used up their privacy budget and are not in this answer (they paid nothing)"
    lines = wrap_footer(note, 40)
    assert all(display_width(x) <= 40 for x in lines) and all(x.startswith("  ") for x in lines[1:])
    assert " ".join(" ".join(lines).split()) == note


def test_no_rows_and_too_many_columns_names_the_columns():
    names = [f"column_number_{k}" for k in range(10)]
    text = format_table(names, [], [False] * 10, max_width=40)
    assert max(_widths(text)) <= 40 and text.startswith("(no rows) columns: column_number_0,")
    assert format_table(names, [], [False] * 10).startswith("+--"), "without a width: the header, as before"


@pytest.mark.parametrize("width", WIDTHS)
def test_show_budget_on_the_demo_fits(con, width):
    """SHOW BUDGET's detail column is ~170 characters: it printed ~150 lines in a 100-column shell."""
    result = con.execute("SHOW BUDGET").result
    text = format_result(result, max_width=width)
    assert max(_widths(text)) <= width
    names, rows, numeric = cells(result)
    records = format_records(names, rows, width, numeric)
    if width >= 80:
        assert text.startswith("+--"), "five columns fit in 80: a table"
        assert len(text.splitlines()) < len(records.splitlines()), "and shorter than one block per row"
    if width == 100:
        assert len(text.splitlines()) <= 110
    plain = format_result(result)
    assert max(_widths(plain)) > 200, "without a width: the table as it always was"
