"""Synthetic releases: ``CREATE SYNTHETIC TABLE name FROM t [USING <synthesizer>] WITH (...)``.

Every synthesizer is one entry of ``SYNTHESIZERS`` (a ``common.Release``), under its SQL name;
this class looks it up there and never switches on the name. Adding a synthesizer is a
mechanism class in ``dpgate.mechanisms`` (the ``Synthesizer`` signature), a module here with
its planning and answer, and one entry below.

- ``mst`` (the default), ``privbayes``, ``independent``: tabular models (``tabular.py``). MST
  measured better than PrivBayes on Adult and a wide generated table on 1- and 2-way marginals
  at every ε tried, and no worse than independent columns on the average of the 1-, 2- and 3-way
  errors, in a fraction of PrivBayes's time (``examples/privbayes_adult.py`` prints the
  comparison);
- ``diffpart``: set-valued data (``setvalued.py``); ``privtree``: a spatial synopsis
  (``synopsis.py``); ``privtree_markov``: a sequence model (``sequences.py``); ``supermodular``,
  experimental, a generalized sample of the records (``generalized.py``).

From then on the release is public: every query over it is free.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import duckdb

from dpgate import backends, errors, mechanisms
from dpgate.catalog.tables import Catalog
from dpgate.frontend.classify import Classified
from dpgate.frontend.settings import Session
from dpgate.mechanisms.base import metered
from dpgate.plans import SynthesisPlan
from dpgate.queries.base import QueryClass, _subject_rows, personalization_notes
from dpgate.queries.synthetic import generalized, sequences, setvalued, synopsis, tabular
from dpgate.queries.synthetic.common import Release, require_free_name, run_epsilon, subject_rows_sql
from dpgate.queries.synthetic.tabular import (  # the tabular synthesizers' names, kept for their callers
    COLUMN_OPTIONS,
    DEFAULT_BINS,
    GENERAL,
    SYNTHESIS_OPTIONS,
    coding_from_dict,
    source_sql,
    synthesis_coding_dict,
)
from dpgate.release import Answer, Result

#: Every synthesizer, under its SQL name (``USING name``), in the order the refusals list them.
SYNTHESIZERS: dict[str, Release] = {
    r.name: r
    for r in (
        tabular.MST,
        tabular.PRIVBAYES,
        tabular.INDEPENDENT,
        setvalued.RELEASE,
        synopsis.RELEASE,
        sequences.RELEASE,
        generalized.RELEASE,
    )
}
MECHANISMS = tuple(SYNTHESIZERS)
#: ``CREATE SYNTHETIC TABLE t FROM src WITH (...)`` without ``USING``.
DEFAULT_MECHANISM = "mst"


# -- planning ------------------------------------------------------------------------------------
def plan(classified: Classified, catalog: Catalog, session: Session) -> SynthesisPlan:
    stmt = classified.statement
    table = classified.protected
    if table.kind == "graph":
        raise errors.UnsupportedQueryError(
            f"{table.name} is a graph: it answers subgraph counts, not synthetic tables", code="DP270",
            hint="synthesize an ordinary protected table",
        )  # fmt: skip
    name = stmt.args["mechanism"].name.lower() if stmt.args.get("mechanism") else DEFAULT_MECHANISM
    entry = SYNTHESIZERS.get(name)
    if entry is None:
        raise errors.NotSupportedError(
            f"Unknown synthesizer {name!r}", code="DP221", hint="USING " + " | ".join(SYNTHESIZERS)
        )
    mechanisms.synthesizer(name, allow_unvetted=table.experimental, table=table.name)  # unvetted: the owner's call
    backends.require_synthesizer(name, table)
    synth_plan = entry.plan(classified, catalog, session)
    dry_run(synth_plan, synth_plan.epsilon)
    return synth_plan


def dry_run(plan: SynthesisPlan, epsilon: float) -> None:
    """Refuse, free, a release whose mechanism cannot run at ``epsilon``: each mechanism runs over no
    rows, which makes every choice that depends on ε and public facts only (its parameters, the
    noise of its first, data-independent steps: DiffPart's root at 6,000 items and ε = 1e-6 drew
    noise below the sampler's floor after the debit)."""
    try:
        SYNTHESIZERS[plan.mechanism].dry_run(plan, epsilon)
    except (errors.DataError, errors.NotSupportedError, ValueError) as e:
        message = e.message if isinstance(e, errors.Error) else str(e)
        at = "" if epsilon == plan.epsilon else f" at ε={epsilon:.3g}, what the personalization rule leaves this release"
        raise errors.ProgrammingError(
            f"{plan.mechanism} cannot run with these parameters{at}: {message}",
            code="DP275" if not isinstance(e, errors.Error) or e.code == "DP275" else "DP287",
            hint="raise epsilon, or change the WITH (...) options (fewer items or symbols, a coarser domain)",
        ) from e  # fmt: skip


#: Releases being made in this process: (database file, opening, name). A second statement creating
#: a name in the making is refused before its debit; the first's debit transaction finds no table of
#: that name. Two analysts creating one name at once were both charged, and one failed after its
#: fit. One process holds a database file, so this set sees every creator.
_MAKING: set[tuple] = set()
_MAKING_LOCK = threading.Lock()


def written_names(plan: SynthesisPlan) -> list[str]:
    """The tables a release writes: its name, and the side tables some releases write beside it
    (checked and reserved like the name itself: another analyst's release named ``r_itemsets``
    made a DiffPart release ``r`` fail after its debit)."""
    return [plan.name] + [plan.name + side for side in SYNTHESIZERS[plan.mechanism].side_tables]


@contextlib.contextmanager
def making(plan: SynthesisPlan, instance_key: tuple) -> Iterator[None]:
    keys = [(*instance_key, n.lower()) for n in written_names(plan)]
    with _MAKING_LOCK:
        busy = next((k[-1] for k in keys if k in _MAKING), None)
        if busy is not None:
            raise errors.ProgrammingError(
                f"A table named {busy} is being written by another statement's release", code="DP226",
                hint="choose another name, or wait and see SHOW RELEASES; nothing was charged",
            )  # fmt: skip
        _MAKING.update(keys)
    try:
        yield
    finally:
        with _MAKING_LOCK:
            _MAKING.difference_update(keys)


def check_at_debit(con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, subjects) -> None:
    """Inside the debit's transaction, before anything is written: the name is still free there (another
    statement may have made it since this one was planned) and the mechanism runs at the ε the
    personalization plan leaves (``dry_run``). A refusal here rolls the debit back: free."""
    entry = SYNTHESIZERS[plan.mechanism]
    names = [n.lower() for n in written_names(plan)]
    taken = con.execute(
        "SELECT min(n) FROM (SELECT lower(table_name) AS n FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' UNION ALL SELECT lower(view_name) FROM duckdb_views() WHERE database_name = "
        "current_database() AND schema_name = 'main') WHERE list_contains(?, n)",
        [names],
    ).fetchone()[0]  # fmt: skip
    if taken is not None:
        raise errors.ProgrammingError(f"A table or view named {taken} already exists", code="DP226",
                                      hint="choose another name; nothing was charged")  # fmt: skip
    if not entry.scales_sample and subjects.rule == "sample" and subjects.combined:
        # These releases count the subjects that took part and cannot scale their counts to everyone:
        # under the sample rule a random part of the roster (a synopsis answered COUNT(*) 4,972 for
        # 10,000 people, half of them with 0.01 ε left)
        short = sum(lv.count for lv in subjects.levels if lv.allowance < subjects.requested)
        raise errors.UnsupportedQueryError(
            f"USING {plan.mechanism} cannot scale a sample of subjects: {short:,} of the {subjects.population:,} "
            f"subjects with budget have less than ε={float(subjects.requested):g} left, and personalization = "
            "'sample' would make this release describe a random part of them", code="DP274",
            hint="use personalization = 'threshold' (the release then describes the subjects with the whole ε, "
            "and says how many) or 'minimum' (everyone, at the smallest ε left), or ask a smaller epsilon; "
            "nothing was charged",
        )  # fmt: skip
    if entry.check_size is not None:  # what the release holds, from the number of subjects it reads (public)
        entry.check_size(plan, subjects.used, float(subjects.parts[0].epsilon))
    dry_run(plan, float(subjects.parts[0].epsilon))


# -- the class -----------------------------------------------------------------------------------
class SyntheticQuery(QueryClass):
    """``CREATE SYNTHETIC TABLE name FROM t USING mechanism WITH (...)``: a public release."""

    name = "synthetic"
    title = "synthetic releases"
    plan_type = SynthesisPlan

    def recognises(self, classified: Classified, ctx) -> bool:
        return classified.kind == "synthetic"

    def plan(self, classified: Classified, ctx) -> SynthesisPlan:
        return plan(classified, ctx.catalog, ctx.session)

    def debit_scope(self, plan: SynthesisPlan, instance_key: tuple):
        """Held from before the debit to the end of the release (``making``)."""
        return making(plan, instance_key)

    def check_at_debit(self, con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, subjects) -> None:
        check_at_debit(con, plan, subjects)

    def bind_check(self, con: duckdb.DuckDBPyConnection, plan: SynthesisPlan, probe: str) -> None:
        SYNTHESIZERS[plan.mechanism].bind_check(con, plan, probe)

    def answer(self, run) -> Answer:
        with metered() as spent:  # what each synthesizer's Synthesis says it spent, and any noisy count beside it
            out = SYNTHESIZERS[run.plan.mechanism].answer(run.con, run.plan, run.debit, run.analyst, rng=run.rng,
                                                          sampling=run.sampling, progress=run.progress)  # fmt: skip
        out.consumed = tuple(spent)
        out.notes += personalization_notes(run.plan, run.subjects, scaled_note=False)
        return out

    def answer_from_release(self, classified: Classified, ctx, con) -> Result | None:
        """A range count a PrivTree synopsis answers for free (``OPTIONS (from_synopsis = ...)``)."""
        return synopsis.from_synopsis(con, classified, ctx.catalog, ctx.session)

    def explain_rows(self, plan: SynthesisPlan, subjects) -> list[tuple]:
        return _subject_rows(plan, subjects) + SYNTHESIZERS[plan.mechanism].explain_rows(plan, subjects)


QUERY_CLASS = SyntheticQuery()

__all__ = [
    "COLUMN_OPTIONS", "DEFAULT_BINS", "DEFAULT_MECHANISM", "GENERAL", "MECHANISMS", "QUERY_CLASS", "SYNTHESIS_OPTIONS",
    "SYNTHESIZERS", "Release", "check_at_debit", "coding_from_dict", "dry_run", "making", "plan", "require_free_name",
    "run_epsilon", "source_sql", "subject_rows_sql", "synthesis_coding_dict", "written_names",
]  # fmt: skip
