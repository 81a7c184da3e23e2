"""The real REPL, driven in-process with prompt-toolkit's pipe input and a dummy output."""

from __future__ import annotations

import io
from contextlib import contextmanager

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

import dpgate
from dpgate.interfaces.shell import Shell
from dpgate.interfaces.shell.app import split_statements


@contextmanager
def shell(db, tmp_path, **kw):
    with dpgate.connect(str(db), analyst="demo") as con, create_pipe_input() as inp:
        out = io.StringIO()
        sh = Shell(con, input=inp, output=DummyOutput(), stdout=out, color=False, history=tmp_path / "history", width=200, **kw)
        yield sh, inp, out


def test_a_query_prints_a_table_and_the_toolbar_budget_drops(demo_db, tmp_path):
    with shell(demo_db, tmp_path) as (sh, inp, out):
        before = sh.toolbar()
        assert "ε left 10" in before and "session ε 0.1" in before and "demo" in before
        inp.send_text("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5)\r sex, COUNT(*) AS n FROM adult GROUP BY sex;\r")
        inp.send_text(".quit\r")
        assert sh.run() == 0
        text = out.getvalue()
        assert "| sex    | n" in text and "Female" in text and "[" in text
        assert "2 rows · ε charged 0.5 · remaining ε 9.5" in text
        assert "ε left 9.5 " in sh.toolbar()


def test_a_refused_query_leaves_the_budget_untouched(demo_db, tmp_path):
    with shell(demo_db, tmp_path) as (sh, inp, out):
        inp.send_text("SELECT * FROM adult;\r.quit\r")
        sh.run()
        assert "error DP252" in out.getvalue() and "hint:" in out.getvalue()
        assert "ε left 10 " in sh.toolbar()
        assert sh.connection.budget() == (10.0, 1e-5)


def test_confirmation_no_spends_nothing_and_yes_spends(demo_db, tmp_path):
    with shell(demo_db, tmp_path) as (sh, inp, out):
        # 1.5 of 10 is 15%: above a 10% confirmation share
        inp.send_text("SET dp_confirm_share = 0.1;\r")
        inp.send_text("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1.5) COUNT(*) FROM adult;\r")
        inp.send_text("n\r")
        inp.send_text("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1.5) COUNT(*) FROM adult;\r")
        inp.send_text("y\r")
        inp.send_text(".quit\r")
        sh.run()
        text = out.getvalue()
        assert "cancelled: nothing was spent" in text
        assert text.count("ε charged 1.5") == 1
        assert sh.connection.budget()[0] == pytest.approx(8.5)


def test_cheap_queries_need_no_confirmation(demo_db, tmp_path):
    with shell(demo_db, tmp_path) as (sh, inp, out):
        inp.send_text("SELECT COUNT(*) FROM adult;\r.quit\r")
        sh.run()
        assert "ε charged 0.1" in out.getvalue()


def test_tab_completes_table_names(demo_db, tmp_path):
    with shell(demo_db, tmp_path) as (sh, inp, out):
        inp.send_text("SELECT COUNT(*) FROM adu\t;\r.quit\r")
        sh.run()
        assert "ε charged 0.1" in out.getvalue()


def test_multiline_and_several_statements(demo_db, tmp_path):
    with shell(demo_db, tmp_path) as (sh, inp, out):
        inp.send_text("SELECT region\r FROM country_regions\r WHERE region = 'Europe'\r LIMIT 2; SELECT 42 AS answer;\r.quit\r")
        sh.run()
        text = out.getvalue()
        assert text.count("Europe") == 2 and "| answer |" in text


def test_ctrl_c_clears_input_and_ctrl_d_leaves(demo_db, tmp_path):
    with shell(demo_db, tmp_path) as (sh, inp, out):
        inp.send_text("SELECT * FROM adult")
        inp.send_text("\x03")  # Ctrl-C: the half-typed statement is dropped
        inp.send_text("SELECT 7 AS seven;\r")
        inp.send_text("\x04")  # Ctrl-D
        assert sh.run() == 0
        assert "| seven |" in out.getvalue() and "DP211" not in out.getvalue()


def test_dot_commands(demo_db, tmp_path):
    script = tmp_path / "q.sql"
    script.write_text("SELECT 1 AS one;\n")
    results = tmp_path / "out.txt"
    with shell(demo_db, tmp_path) as (sh, inp, out):
        for line in [".help", ".tables", ".schema adult", ".budget", ".intervals off",
                     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) COUNT(*) AS n FROM adult;",
                     ".explain on", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) COUNT(*) AS m FROM adult;",
                     ".explain off", ".mode json", f".read {script}", ".mode csv", f".output {results}",
                     "SELECT region FROM country_regions ORDER BY 1 LIMIT 1;", ".output", ".mode nonsense", ".nope", ".quit"]:  # fmt: skip
            inp.send_text(line + "\r")
        sh.run()
    text = out.getvalue()
    assert ".schema [table]" in text and ".read file" in text  # .help
    assert "| adult" in text and "protected" in text  # .tables
    assert "privacy unit" in text and "[17, 90]" in text  # .schema
    assert "analyst demo" in text  # .budget
    assert "intervals off" in text
    n_line = next(line for line in text.splitlines() if line.startswith("| ") and line.strip("| ").isdigit())
    assert "[" not in n_line  # no interval shown with .intervals off
    assert "discrete Laplace" in text  # .explain on printed the plan
    assert '"columns": ["one"]' in text and '"rows": [\n    [1]\n  ]' in text  # .read in json mode
    assert results.read_text() == "region\nAsia\n"
    assert "error DP241" in text and "error DP240" in text


def test_split_statements_respects_strings_and_comments():
    assert split_statements("SELECT ';' AS s; SELECT 2 -- a comment; no split\n;") == [
        "SELECT ';' AS s",
        "SELECT 2 -- a comment; no split",
    ]
    assert split_statements("-- only a comment\n") == []


def test_script_mode(demo_db, tmp_path):
    with dpgate.connect(str(demo_db), analyst="demo") as con:
        out, err = io.StringIO(), io.StringIO()
        sh = Shell(con, interactive=False, stdout=out, stderr=err, color=False)
        code = sh.run_script("SELECT COUNT(*) AS n FROM adult;\n.mode csv\nSELECT 1 AS x;\nSELECT * FROM adult;\n")
    assert code == 1
    assert "| n " in out.getvalue() and "x\n1" in out.getvalue()
    assert "error DP252" in err.getvalue() and "error" not in out.getvalue()


def test_ctrl_r_searches_history(demo_db, tmp_path):
    """The shell's own session: Ctrl-R finds an earlier statement, which is then run again."""
    with shell(demo_db, tmp_path) as (sh, inp, out):
        for keys in ("SELECT 42 AS answer;\r", "SELECT 7 AS other;\r"):
            inp.send_text(keys)
            sh.run_text(sh.session.prompt())
        inp.send_text("\x12answ\r\r")  # Ctrl-R, part of the earlier statement, accept, run
        again = sh.session.prompt()
        assert again == "SELECT 42 AS answer;"
        sh.run_text(again)
    assert out.getvalue().count("| answer |") == 2
    assert "SELECT 42 AS answer;" in (tmp_path / "history").read_text()


def test_psql_habits_run_on_enter(demo_db, tmp_path):
    """\\dt, \\d TABLE, \\? and \\q run as soon as Enter is pressed (they gave continuation prompts)."""
    with shell(demo_db, tmp_path) as (sh, inp, out):
        for line in ["\\dt", "\\d adult", "\\?", "\\x", "\\l", "\\q"]:
            inp.send_text(line + "\r")
        inp.send_text("SELECT 7 AS never;\r")  # after \q: not run
        assert sh.run() == 0
    text = out.getvalue()
    assert "| adult" in text and "protected" in text  # \dt
    assert "privacy unit" in text and "[17, 90]" in text  # \d adult
    assert ".schema [table]" in text and "\\dt" in text  # \?
    assert "Expanded display is on." in text  # \x
    assert "error DP240: Unknown command \\l" in text and "\\q \\dt" in text
    assert "never" not in text


def test_the_footer_follows_the_intervals_setting(demo_db, tmp_path):
    with shell(demo_db, tmp_path) as (sh, inp, out):
        for line in ["SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) COUNT(*) AS n FROM adult;", ".intervals off",
                     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) COUNT(*) AS m FROM adult;", ".quit"]:  # fmt: skip
            inp.send_text(line + "\r")
        sh.run()
    text = out.getvalue()
    first, second = text.split("intervals off")
    assert "95% intervals" in first and "ε charged 0.2" in second and "% intervals" not in second


def test_a_query_over_the_quota_is_refused_without_asking_first(demo_db, tmp_path):
    """Asking "Run it?" for a query the gateway then refuses served nobody: it is refused at once, free."""
    with dpgate.connect(str(demo_db), analyst="demo") as other:  # 9.5 of the quota of 10 spent elsewhere
        for _ in range(5):
            other.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1.9) COUNT(*) FROM adult")
    with shell(demo_db, tmp_path) as (sh, inp, out):
        inp.send_text("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) FROM adult;\r.quit\r")
        sh.run()
        text = out.getvalue()
        assert "Run it?" not in text and "error DP401" in text
        assert sh.connection.budget()[0] == pytest.approx(0.5)


def test_bad_files_for_read_and_output_are_errors_not_tracebacks(demo_db, tmp_path):
    latin = tmp_path / "latin.sql"
    latin.write_bytes("SELECT 'caf\xe9';\n".encode("latin-1"))
    loop = tmp_path / "loop.sql"
    loop.write_text(f"\\i {loop}\n")
    with shell(demo_db, tmp_path) as (sh, inp, out):
        sh._run_one("\\o a\x00b")  # a NUL byte cannot be typed through the pipe input
        for line in [f"\\i {latin}", f"\\i {loop}", "\\o /dev/full",
                     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) AS n FROM adult;",
                     "SELECT 5 AS five;", "\\q"]:  # fmt: skip
            inp.send_text(line + "\r")
        assert sh.run() == 0
    text = out.getvalue()
    assert "error DP242: Cannot read" in text and "not UTF-8 text" in text
    assert "more than 16 deep" in text
    assert "Cannot write a" in text and "not a file name" in text
    # the charged answer is not lost: it is on the screen, and later results stay there
    assert "Cannot write /dev/full" in text and "| n " in text and "| five |" in text


def test_a_pasted_meta_command_ends_at_its_line(demo_db, tmp_path):
    with shell(demo_db, tmp_path) as (sh, inp, out):
        inp.send_text("\x1b[200~\\dt\nSELECT 42 AS answer;\x1b[201~\r")  # a bracketed paste of two lines
        inp.send_text('\\d "adult"\r\\q\r')
        sh.run()
    text = out.getvalue()
    assert "| adult" in text and "| answer |" in text and "DP240" not in text
    assert "privacy unit" in text  # \d "adult": a quoted name


def test_the_confirmation_reads_the_quota_as_it_is_now(demo_db, tmp_path):
    """The owner raised the quota while the shell was open: a query above the share is asked about,
    not run at once on the strength of the stale figure."""
    from dpgate.catalog.owner import Owner

    with dpgate.connect(str(demo_db), analyst="demo") as other:
        for _ in range(5):
            other.execute("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1.8, fresh = true) COUNT(*) FROM adult")
    with shell(demo_db, tmp_path) as (sh, inp, out):
        with Owner(demo_db, create=False) as o:  # 1 left before; 11 now
            o.add_analyst("demo", epsilon=20.0, delta=1e-5, epsilon_per_query=5.0)
        inp.send_text("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 4) COUNT(*) FROM adult;\r")
        inp.send_text("n\r.quit\r")
        sh.run()
        assert "Run it?" in out.getvalue() or "cancelled: nothing was spent" in out.getvalue()
        assert sh.connection.budget()[0] == pytest.approx(11.0)


def test_the_intervals_label_follows_what_is_printed():
    from dpgate.interfaces.render import intervals_shown
    from dpgate.release import Result

    class Rel:
        def __init__(self, ivs):
            self.intervals = ivs

    def result(columns, ivs):
        return Result(columns, ["BIGINT"] * len(columns), [(1,) * len(columns)], Rel(ivs))

    assert intervals_shown(result(["n"], [{"n": (0, 2)}]), True)
    assert not intervals_shown(result(["n"], [{"n": (0, 2)}]), False)  # .intervals off
    assert not intervals_shown(result(["n"], [{"n": (None, None)}]), True)  # consistent = true: none to show
    assert intervals_shown(result(["n", "n_ci_low", "n_ci_high"], [{"n": (0, 2)}]), False)  # asked for as columns
