"""Notebooks: the cursor's HTML and text displays, and the %dpsql magics' options."""

from __future__ import annotations

import pytest

import dpgate
from conftest import TEST_SEED
from dpgate.interfaces import notebook

DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.25) "
GROUPED = DP + "race, COUNT(*) AS n, AVG(age) AS mean_age FROM adult GROUP BY race"


@pytest.fixture(autouse=True)
def _no_notebook_connection():
    notebook.close()
    yield
    notebook.close()


class FakeIPython:
    def __init__(self):
        self.magics = {}

    def register_magic_function(self, fn, kind, name):
        self.magics[(kind, name)] = fn

    def line(self, text):
        return self.magics[("line", "dpsql")](text)

    def cell(self, line, body):
        return self.magics[("cell", "dpsql")](line, body)


class Printer:  # what IPython passes to _repr_pretty_
    def __init__(self):
        self.out = []

    def text(self, s):
        self.out.append(s)


# -- displays ------------------------------------------------------------------------------------
def test_html_has_every_value_its_interval_and_the_footer(seeded):
    cur = seeded.execute(GROUPED)
    rows, intervals = cur.fetchall(), cur.release.intervals
    html = cur._repr_html_()
    assert html.count("<tr>") == len(rows) + 1  # the header and one per row
    for row, iv in zip(rows, intervals):
        assert f"<td>{row[0]}</td>" in html
        lo, hi = iv["n"]
        assert f"<td>{row[1]}<br><small" in html and f"[{lo}, {hi}]" in html
    assert "cost: ε 0.25" in html and "population: all 32,561 subjects on the roster" in html
    assert "NOT PRIVATE" in html  # the test seed's note is among the notes


def test_html_escapes_values_names_and_messages(con):
    cur = con.execute("SELECT '<i>x</i> & \"y\"' AS \"a<b\"")
    html = cur._repr_html_()
    assert "<i>" not in html and "a<b" not in html
    assert "&lt;i&gt;x&lt;/i&gt; &amp; &quot;y&quot;" in html and "<th>a&lt;b</th>" in html
    cur = con.execute("SET dp_epsilon = 0.2")
    assert "SET dp_epsilon" in cur._repr_html_() and "<table>" not in cur._repr_html_()


def test_html_shows_the_first_rows_of_a_long_result(con):
    cur = con.execute("SELECT range AS i FROM range(100)")
    cur.fetchmany(70)  # the display shows the answer, wherever fetching is
    html = cur._repr_html_()
    assert html.count("<tr>") == 61 and "40 more rows" in html


def test_text_display_and_repr(seeded):
    cur = seeded.cursor()
    assert repr(cur) == "<dpgate.Cursor no result yet>"
    cur.execute(GROUPED)
    n = len(cur.fetchall())
    assert repr(cur) == f"<dpgate.Cursor {n} row(s) × 3 column(s): race, n, mean_age; ε 0.25 charged>"
    p = Printer()
    cur._repr_pretty_(p, False)
    text = p.out[0]
    lo, hi = cur.release.intervals[0]["n"]
    assert f"[{lo}, {hi}]" in text and "| race" in text
    assert any(line.startswith("cost: ε 0.25") for line in text.splitlines())
    assert "population: all 32,561 subjects on the roster" in text
    cur.close()
    assert repr(cur) == "<dpgate.Cursor closed>"


# -- the magics ------------------------------------------------------------------------------------
def test_connect_option_then_line_and_cell_statements(demo_db):
    ip = FakeIPython()
    dpgate.load_ipython_extension(ip)
    assert ip.line(f"--connect {demo_db} demo") is None
    assert ip.line("") == f"dpgate: {demo_db} as demo"
    cur = ip.cell("", "  " + DP + "COUNT(*) AS n FROM adult\n")
    assert cur.release.epsilon == 0.25 and "cost: ε 0.25" in cur._repr_html_()
    budget = ip.line("SHOW BUDGET").fetchall()
    assert budget[0][1] == pytest.approx(10 - 0.25)  # the demo analyst's quota is ε 10


def test_cell_options_connect_and_keep_the_connection(demo_db, tmp_path):
    ip = FakeIPython()
    notebook.load_ipython_extension(ip)
    ip.cell(f"--db '{demo_db}' --analyst demo", "SET dp_epsilon = 0.125")
    first = notebook._STATE["connection"]
    cur = ip.cell(f"--db={demo_db} --analyst=demo", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS () COUNT(*) FROM adult")
    assert notebook._STATE["connection"] is first  # the same session: its SET still holds
    assert cur.release.epsilon == 0.125
    cur = ip.line("SELECT 'x' AS v -- a comment, not an option")
    assert cur.fetchall() == [("x",)]


def test_another_database_replaces_the_connection(demo_db, tmp_path):
    other = tmp_path / "other.duckdb"
    other.write_bytes(demo_db.read_bytes())
    notebook.dpsql(f"connect {demo_db} demo")
    first = notebook._STATE["connection"]
    assert notebook.dpsql(f"--db {other} SELECT 1 AS one").fetchall() == [(1,)]  # the analyst is kept
    assert first.closed and notebook._STATE["analyst"] == "demo"
    assert notebook.dpsql("").endswith(f"{other} as demo")


def test_a_failed_connect_keeps_the_current_connection(demo_db, tmp_path):
    notebook.dpsql(f"--connect {demo_db} demo")
    with pytest.raises(dpgate.Error):
        notebook.dpsql(f"--connect {tmp_path / 'missing.duckdb'} demo")
    assert notebook.dpsql("SELECT 2 AS two").fetchall() == [(2,)]


@pytest.mark.parametrize(("line", "cell"), [
    ("--connect only_a_path.duckdb", None),
    ("connect a b c", None),
    ("SELECT 1", "SELECT 2"),  # a cell's first line takes options only
    ("SELECT 1", None),  # no connection yet
    ("--analyst demo", "SELECT 1"),  # no database to take
])  # fmt: skip
def test_bad_lines_say_how(line, cell):
    with pytest.raises(dpgate.InterfaceError) as e:
        notebook.dpsql(line, cell)
    assert e.value.code == "DP106" and "%dpsql" in e.value.hint


def test_with_ipython(demo_db):
    from IPython.core import interactiveshell  # in the test extra: the magic as Jupyter loads it
    ip = interactiveshell.InteractiveShell.instance()
    try:
        ip.run_line_magic("load_ext", "dpgate")
        ip.run_line_magic("dpsql", f"--connect {demo_db} demo")
        cur = ip.run_cell_magic("dpsql", "", DP.replace("0.25", "0.1") + "COUNT(*) AS n FROM adult")
        shown, _ = ip.display_formatter.format(cur)
        lo, hi = cur.release.intervals[0]["n"]
        assert "<table>" in shown["text/html"] and f"[{lo}, {hi}]" in shown["text/html"]
        assert f"[{lo}, {hi}]" in shown["text/plain"] and "cost: ε 0.1" in shown["text/plain"]
    finally:
        interactiveshell.InteractiveShell.clear_instance()


def test_seeded_cells_match_the_dbapi(demo_db):
    # The magic runs the statement through the same gateway as dpgate.connect: same seed, same answer.
    with dpgate.connect(str(demo_db), analyst="demo", test_seed=TEST_SEED) as con:
        expected = con.execute(GROUPED).fetchall()
    notebook._STATE["connection"] = dpgate.connect(str(demo_db), analyst="demo", test_seed=TEST_SEED)
    assert notebook.dpsql("", GROUPED).fetchall() == expected


def test_text_display_of_a_long_result_is_cut(con):
    cur = con.execute("SELECT range AS i FROM range(1000)")
    p = Printer()
    cur._repr_pretty_(p, False)
    assert "| 39 |" in p.out[0] and "| 40 |" not in p.out[0] and "(960 more rows)" in p.out[0]
