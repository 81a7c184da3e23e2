"""Every option value, however absurd, is a dpgate error with a code and a hint, or a normal answer.

Values are generated (1e308, -0.0, inf, nan, '1e999999', integers of 10,000 digits, strings where
numbers go, NULL, booleans, nested expressions, parameters) and fed into every option of every
statement form: ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (...)`` (counts, key selection, top-k,
quantiles, a subgraph count), ``SET dp_...`` and ``CREATE SYNTHETIC TABLE ... WITH (...)`` for each
mechanism. A refusal charges nothing: an option value is a public fact of the statement, so it is
refused before the debit, never by a failure after it (DP404) or a bug (DP500).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from decimal import Decimal

import duckdb
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import dpgate
from dpgate import errors
from dpgate.catalog import caps
from dpgate.catalog.owner import Owner
from dpgate.frontend.settings import SPECS, Spec
from dpgate.gateway import Gateway
from dpgate.queries import synthetic
from dpgate.queries.synthetic import generalized, sequences, setvalued, synopsis

SETUP = """
CREATE TABLE t AS SELECT i // 2 AS pid, i % 90 AS age, CASE WHEN i % 3 = 0 THEN 'F' ELSE 'M' END AS sex,
  (i % 50) * 1.5 AS x, 'g' || (i % 7) AS g, (i % 40) * 1.0 AS lat FROM range(600) r(i);
CREATE TABLE b AS SELECT i // 3 AS basket, ['bread', 'milk', 'tea', 'jam'][i % 4 + 1] AS item FROM range(300) r(i);
CREATE TABLE s AS SELECT i // 5 AS person, i % 5 AS pos, ['a', 'b', 'c'][i % 3 + 1] AS sym FROM range(300) r(i);
CREATE TABLE e (src INTEGER, dst INTEGER);
INSERT INTO e SELECT i, (i * 7 + 1) % 30 FROM range(30) r(i) WHERE i <> (i * 7 + 1) % 30;
"""

SELECT = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS ({options}) "
CREATE = "CREATE SYNTHETIC TABLE r FROM {source} {using}WITH ({options})"


def _names(module) -> list[str]:
    return sorted({*module.GENERAL, *module.OPTIONS})


#: form -> (statement with {options}, the options that make it valid, the option names it takes)
FORMS: dict[str, tuple[str, dict[str, str], list[str]]] = {
    "count": (SELECT + "COUNT(*), SUM(x), AVG(age) FROM t", {}, sorted(SPECS)),
    "keys": (SELECT + "g, COUNT(*) FROM t GROUP BY g", {}, sorted(SPECS)),
    "topk": (SELECT + "g, COUNT(*) FROM t GROUP BY g ORDER BY COUNT(*) DESC LIMIT 3", {}, sorted(SPECS)),
    "quantile": (SELECT + "MEDIAN(age) FROM t", {}, sorted(SPECS)),
    "graph": (SELECT + "TRIANGLE_COUNT(src, dst) FROM e", {}, sorted(SPECS)),
    "mst": (CREATE.format(source="t", using="", options="{options}"), {"columns": "'age, sex, x'"},
            sorted({*synthetic.GENERAL, *synthetic.COLUMN_OPTIONS})),
    "privbayes": (CREATE.format(source="t", using="USING privbayes ", options="{options}"),
                  {"columns": "'age, sex, x'"}, sorted({*synthetic.GENERAL, *synthetic.SYNTHESIS_OPTIONS})),
    "independent": (CREATE.format(source="t", using="USING independent ", options="{options}"),
                    {"columns": "'age, sex'"}, sorted({*synthetic.GENERAL, *synthetic.COLUMN_OPTIONS})),
    "privtree": (CREATE.format(source="t", using="USING privtree ", options="{options}"), {"columns": "'x, lat'"},
                 _names(synopsis)),
    "privtree_markov": (CREATE.format(source="s", using="USING privtree_markov ", options="{options}"),
                        {"position": "'pos'", "symbol": "'sym'"}, _names(sequences)),
    "diffpart": (CREATE.format(source="b", using="USING diffpart ", options="{options}"), {}, _names(setvalued)),
    "supermodular": (CREATE.format(source="t", using="USING supermodular ", options="{options}"),
                     {"columns": "'sex'", "delta": "0.3"}, _names(generalized)),
}  # fmt: skip
SETTINGS = sorted(name for name, spec in SPECS.items() if spec.session)

_NUMBERS = st.one_of(
    st.floats().map(repr),  # inf, nan, 1e+308, -0.0, 5e-324
    st.integers(-(10**40), 10**40).map(str),
    st.integers(1, 12_000).map(lambda n: "9" * n),
    st.sampled_from(["1e999999", "1e-400", ".5", "1.", "1_000", "1e-6", "1e-7", "1e6", "1000000.5", "2147483648",
                     "9223372036854775808", "0", "1", "2", "3", "64", "10000000", "10000001", "0.3", "0.999"]),
)  # fmt: skip
_WORDS = st.sampled_from([
    "NULL", "true", "false", "x", "inf", "nan", "''", "'1e999999'", "'nan'", "'inf'", "'0.5'", "'-0'", "'sample'",
    "'threshold'", "'minimum'", "'partition'", "'mi'", "'f'", "'gray'", "'em'", "'age, sex'", "'x, lat'", "'item'",
    "'pos'", "'sym'", "'age, age'", "pid", "'r'", "$$", "DATE '2020-01-01'", "INTERVAL 1 DAY", "{'a': 1}", "x'00'",
])  # fmt: skip


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_ATOMS = st.one_of(_NUMBERS, _NUMBERS.map(lambda t: "-" + t), _WORDS, st.text(max_size=12).map(_quoted))
_VALUES = st.recursive(
    _ATOMS,
    lambda inner: st.one_of(
        inner.map(lambda v: f"({v})"), inner.map(lambda v: f"-{v}"), inner.map(lambda v: f"[{v}]"),
        inner.map(lambda v: f"CAST({v} AS DOUBLE)"), st.tuples(inner, inner).map(lambda p: f"{p[0]} + {p[1]}"),
    ),
    max_leaves=3,
)  # fmt: skip
_PARAMS = st.one_of(
    st.floats(), st.integers(-(10**30), 10**30), st.booleans(), st.none(), st.text(max_size=12), st.binary(max_size=4),
    st.decimals(allow_nan=True, allow_infinity=True), st.just(Decimal("9" * 10_000)),
)  # fmt: skip
#: (SQL text of the value, the parameter it binds, if it is a placeholder)
_VALUE = st.one_of(_VALUES.map(lambda v: (v, None)), _PARAMS.map(lambda p: ("?", p)))


def _spec(form: str, name: str) -> Spec | None:
    own = {"privtree": synopsis.OPTIONS, "privtree_markov": sequences.OPTIONS, "diffpart": setvalued.OPTIONS,
           "supermodular": generalized.OPTIONS}.get(form, synthetic.SYNTHESIS_OPTIONS)  # fmt: skip
    return own.get(name) or SPECS.get(name)


def _plausible(spec: Spec | None) -> list[str]:
    """Values inside an option's range (its ends included), so that statements also run, and run with
    extreme but accepted values beside the odd ones."""
    if spec is None or spec.kind in ("str", "ident"):
        return [repr(c) for c in (spec.choices or ())] if spec is not None else []
    if spec.kind == "bool":
        return ["true", "false"]
    low = 0.0 if spec.low is None else spec.low
    out = [repr(low * 1.001 if spec.low_open else low), repr(low + 1), "0.5", "2"]
    if spec.high is not None:
        out.append(repr(spec.high * 0.999 if spec.high_open else spec.high))
    return [str(int(float(v))) if spec.kind == "int" else v for v in out if spec.kind != "int" or float(v).is_integer()]


def _value(form: str, name: str):
    """An option's value: one of its plausible values two times in three, else anything."""
    plausible = _plausible(_spec(form, name))
    if not plausible:
        return _VALUE
    accepted = st.sampled_from(plausible).map(lambda v: (v, None))
    return st.one_of(accepted, accepted, _VALUE)


#: Refusals of a parameter's value by the gateway's binding, which carry no hint yet (not an option's).
HINTLESS = {"DP601", "DP602", "DP604"}


class Database:
    """The module's database: one analyst connection (refusals leave it as it was) and an owner's view of
    everything a statement may charge or write."""

    def __init__(self, path):
        self.path = path
        self.owner = Owner(path)
        self.con = dpgate.connect(str(path), analyst="alice")
        self.last = self.spent()

    def spent(self) -> tuple:
        """The analyst, every roster, the ledger, the releases."""
        con = self.owner.con
        rosters = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'dpgate' AND table_name LIKE 'roster%' "
            "ORDER BY 1").fetchall()]  # fmt: skip
        return (
            con.execute("SELECT epsilon_spent, delta_spent FROM dpgate.analysts").fetchall(),
            [con.execute(f"SELECT sum(epsilon_spent), sum(delta_spent), count(*) FROM dpgate.{r}").fetchone()
             for r in rosters],
            con.execute("SELECT count(*) FROM dpgate.ledger").fetchone(),
            con.execute("SELECT count(*) FROM dpgate.release_registry").fetchone(),
        )  # fmt: skip

    def check(self, sql: str, params=None, con=None, *, generated: bool = False) -> None:
        """Run ``sql``: an answer, or a dpgate error with a code and a hint that changed nothing."""
        con = con or self.con
        note = event if generated else (lambda _: None)
        try:
            cur = con.cursor().execute(sql, params)
        except errors.Error as e:
            note(f"refused {e.code}")
            assert re.fullmatch(r"DP\d{3}", e.code or ""), (sql[:300], e)
            assert e.code not in ("DP000", "DP404", "DP500"), (sql[:300], e)  # refused before the debit, not a bug
            assert e.hint or e.code in HINTLESS, (sql[:300], e)
            assert self.spent() == self.last, (sql[:300], e)  # a refusal charges nothing
            return
        note("answered")
        if sql.startswith("CREATE SYNTHETIC"):
            con.cursor().execute("DROP SYNTHETIC TABLE r")
        else:
            cur.fetchall()
        self.last = self.spent()


@pytest.fixture(scope="module")
def wired():
    """The gateway's cost of a statement carries the size of the release it may write, so that the
    release caps bound every release here (a gateway that already does so is left as it is)."""
    cost_of = Gateway._cost

    def _cost(self, plan, sql, private):
        cost = cost_of(self, plan, sql, private)
        return cost if cost.release is not None else dataclasses.replace(cost, release=caps.release_size(plan))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Gateway, "_cost", _cost)
        yield


@pytest.fixture(scope="module")
def db(tmp_path_factory, wired):
    path = tmp_path_factory.mktemp("options") / "options.duckdb"
    raw = duckdb.connect(str(path))
    raw.execute(SETUP)
    raw.close()
    with Owner(path) as o:
        budget = dict(epsilon=1e12, public_roster=True)
        o.protect("t", unit="pid", max_rows=2, subject_delta=0.5, experimental=True, hierarchies={"sex": ["F", "M"]},
                  bounds={"age": (0, 89), "x": (0, 75), "lat": (0, 40)}, domains={"sex": ["F", "M"]}, **budget)
        o.protect("b", unit="basket", max_rows=4, domains={"item": ["bread", "milk", "tea", "jam"]}, **budget)
        o.protect("s", unit="person", max_rows=5, domains={"sym": ["a", "b", "c"]}, bounds={"pos": (0, 4)}, **budget)
        o.protect_graph("e", src="src", dst="dst", nodes=30, epsilon=1e12)
        o.add_analyst("alice", epsilon=1e15, delta=1e6, epsilon_per_query=1e15, delta_per_query=1.0)
        o.set_release_caps("alice", release_rows=5000)  # a generated rows = 9999999 is refused, not written
    database = Database(path)
    yield database
    database.con.close()
    database.owner.close()
    shutil.rmtree(path.parent, ignore_errors=True)


def _statement(form: str, chosen: dict[str, str]) -> str:
    template, base, _ = FORMS[form]
    options = {**base, **chosen}
    return template.format(options=", ".join(f"{k} = {v}" for k, v in options.items()))


#: Examples per run, the same ones every run (a suite must pass or fail alike on every machine);
#: DPGATE_OPTION_EXAMPLES=3000 searches further, with fresh examples each time (minutes).
EXAMPLES = int(os.environ.get("DPGATE_OPTION_EXAMPLES", "60"))
FIXED = "DPGATE_OPTION_EXAMPLES" not in os.environ


@settings(max_examples=EXAMPLES, deadline=None, derandomize=FIXED,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), form=st.sampled_from(sorted(FORMS)))
def test_every_option_value_is_an_answer_or_a_coded_refusal(db, data, form):
    order = data.draw(st.permutations(FORMS[form][2]), label="order")
    names = order[: data.draw(st.integers(1, 3), label="how many")]
    chosen = {name: data.draw(_value(form, name), label=name) for name in names}
    params = [p for text, p in chosen.values() if text == "?"]
    db.check(_statement(form, {k: text for k, (text, _) in chosen.items()}), params or None, generated=True)


@settings(max_examples=EXAMPLES // 2, deadline=None, derandomize=FIXED,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), name=st.sampled_from(SETTINGS))
def test_every_setting_value_is_a_change_or_a_coded_refusal(db, data, name):
    text, param = data.draw(_value("count", name), label="value")
    with dpgate.connect(str(db.path), analyst="alice") as con:  # its own session: a SET changes the defaults
        db.check(f"SET dp_{name} = {text}", None if text != "?" else [param], con=con, generated=True)


#: The values reported to escape (OverflowError, ValueError, decimal errors, a hang after the debit): in
#: every option of the count form; the first ``OWN`` of them in each mechanism's own options.
ABSURD = ["1e308", "-0.0", "nan", "9" * 10_000, "'abc'", "NULL", "5e-324", "1e15", "inf", "'1e999999'", "true",
          "(1 + 1)"]  # fmt: skip
OWN = 8


#: Parameter values bound into an option (a signalling NaN, a decimal no float holds, bytes).
PARAMETERS = [float("-inf"), Decimal("sNaN"), Decimal("9" * 10_000), b"\x00"]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_known_absurd_values_in_every_option(db, form):
    """Each value in every option of the form (the general options once, in the count form)."""
    if form == "count":
        for name in FORMS[form][2]:
            for value in ABSURD:
                db.check(_statement(form, {name: value}))
            for param in PARAMETERS:
                db.check(_statement(form, {name: "?"}), [param])
        return
    for name in (n for n in FORMS[form][2] if n not in SPECS):
        for value in ABSURD[:OWN]:
            db.check(_statement(form, {name: value}))
