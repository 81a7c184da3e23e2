"""Every dpgate error code, its classes and what it means: one table, the documentation's is generated from it.

A code is a contract: clients and tests match on ``Error.code``, and the server sends it in the
error's detail. Keeping every code in one table, with the classes that carry it and one sentence
of meaning, means a code cannot quietly mean two things and the documentation cannot drift from
the code: ``python -m dpgate.codes`` prints the table of the page ``docs/errors.md``,
``tests/test_docs.py`` checks that the page holds exactly that output, and
``tests/test_error_codes.py`` that every code raised in ``dpgate/`` is here with the class that
raises it, and that nothing here is dead.

Families (the hundreds digit): ``DP1xx`` the connection and the interface, ``DP2xx`` the
statement, ``DP3xx`` policy, ``DP4xx`` the budget and failures after the debit, ``DP5xx`` a bug
in dpgate, ``DP6xx`` data, parameters and the database file, ``DP7xx`` the server.

This module is in the base stage: it imports only ``dpgate.errors`` and the standard library.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from dpgate import errors

E = errors  # keeps the table's lines short


@dataclass(frozen=True)
class Code:
    """One code: every class raised with it, and what it means in one sentence."""

    classes: tuple[type[errors.Error], ...]
    meaning: str


@dataclass(frozen=True)
class Family:
    """The codes of one hundred: ``prefix`` such as ``"DP1"`` and a short title."""

    prefix: str
    title: str


FAMILIES: tuple[Family, ...] = (
    Family("DP1", "the connection and the interface"),
    Family("DP2", "the statement"),
    Family("DP3", "policy: the owner's declarations and the analyst's caps"),
    Family("DP4", "the budget, and failures after the debit"),
    Family("DP5", "a bug in dpgate"),
    Family("DP6", "data, parameters and the database file"),
    Family("DP7", "the server"),
)

#: Codes raised by a path the raise-site reader in ``tests/test_error_codes.py`` cannot follow,
#: each with how it is raised, so that an entry is never dead by accident. None today: class
#: defaults (DP500 for ``InternalError``), helpers and constants are all followed.
RAISED_ELSEWHERE: dict[str, str] = {}


def _c(classes: type[errors.Error] | tuple[type[errors.Error], ...], meaning: str) -> Code:
    return Code(classes if isinstance(classes, tuple) else (classes,), meaning)


# One line per code, so that the table reads as docs/errors.md's does.
# fmt: off
CODES: dict[str, Code] = {
    # -- DP1xx: the connection and the interface ---------------------------------------------------
    "DP100": _c(E.InterfaceError, "The connection, cursor or owner handle is closed."),
    "DP101": _c(E.InterfaceError, "A bad `connect()` or command-line argument: no database file, no analyst, or an option that does not fit."),
    "DP102": _c(E.OperationalError, "The database file cannot be opened (another process holds its lock)."),
    "DP103": _c(E.InterfaceError, "The database path is a directory, not a file."),
    "DP104": _c(E.InterfaceError, "The file is not a DuckDB database."),
    "DP105": _c((E.NotSupportedError, E.InterfaceError), "An optional library is not installed (the message names the extra)."),
    "DP106": _c(E.InterfaceError, "The notebook magic has no connection, or a malformed option line."),
    "DP107": _c(E.InterfaceError, "A statement was started on a connection while another runs there (e.g. from a progress callback)."),
    # -- DP2xx: the statement ----------------------------------------------------------------------
    "DP200": _c(E.ProgrammingError, "Misuse of the cursor: fetch before execute, or execute() without SQL text."),
    "DP201": _c(E.ParseError, "A syntax error (with line and column)."),
    "DP202": _c(E.ParseError, "An empty statement."),
    "DP203": _c(E.ParseError, "Several statements in one string; dpgate runs one at a time."),
    "DP204": _c(E.ProgrammingError, "An unknown option or setting."),
    "DP205": _c(E.ProgrammingError, "A bad option or setting value: not a literal, not one accepted, or given twice."),
    "DP206": _c(E.UnsupportedQueryError, "EXPLAIN PRIVACY of something that is not a query, or DESCRIBE of something that is not a table."),
    "DP207": _c(E.UnsupportedQueryError, "A DP clause or DP statement over public data only."),
    "DP208": _c(E.ParseError, "The statement as dpgate would write it for DuckDB reads differently from the one received."),
    "DP211": _c((E.UnsupportedQueryError, E.PolicyError), "A read of row-level values: rows, DISTINCT values or ungrouped columns of a protected table, or its privacy unit."),
    "DP212": _c(E.UnsupportedQueryError, "An aggregate dpgate does not compute here (over dates, in the per-subject subquery, or over a graph)."),
    "DP213": _c(E.PolicyError, "A SUM, AVG or release input without usable declared bounds."),
    "DP214": _c(E.PolicyError, "A GROUP BY key without a declared domain where DP key selection is not possible (delta = 0, or too few subjects)."),
    "DP215": _c(E.UnsupportedQueryError, "A join dpgate cannot answer: a self-join, different subject spaces, not on the privacy unit, not a lookup, a bad condition, or a graph join but the triangle."),
    "DP216": _c(E.UnsupportedQueryError, "A subquery, CTE or set operation dpgate cannot answer over protected data."),
    "DP218": _c(E.ProgrammingError, "A column, alias or GROUP BY position that does not resolve to exactly one column."),
    "DP219": _c(E.UnsupportedQueryError, "No query class answers this statement."),
    "DP220": _c(E.NotSupportedError, "A function, table function, schema or database analysts may not use."),
    "DP221": _c(E.NotSupportedError, "A forbidden statement or engine setting, or an unknown synthesizer."),
    "DP222": _c(E.NotSupportedError, "A write: analysts have read-only access."),
    "DP223": _c(E.NotSupportedError, "A read of dpgate's schema or of the subjects' budgets."),
    "DP224": _c(E.NotSupportedError, "A view dpgate cannot analyse or that reads what analysts may not (a tainted view)."),
    "DP225": _c(E.ProgrammingError, "An unknown table or release."),
    "DP226": _c(E.ProgrammingError, "A release name that is invalid or already taken."),
    "DP227": _c(E.UnsupportedQueryError, "A query the named synopsis cannot answer."),
    "DP230": _c(E.ProgrammingError, "DuckDB (or Spark) cannot bind the query."),
    "DP231": _c(E.ProgrammingError, "Post-processing of the noisy answer failed."),
    "DP240": _c(E.ProgrammingError, "The shell: an unknown dot-command."),
    "DP241": _c(E.ProgrammingError, "The shell: a bad dot-command argument."),
    "DP242": _c(E.ProgrammingError, "The shell: a file that cannot be read or written."),
    "DP250": _c(E.UnsupportedQueryError, "Not on the allowlist: a decorated FROM item (a sample, PIVOT or LATERAL)."),
    "DP251": _c(E.UnsupportedQueryError, "Not on the allowlist: a join kind or condition."),
    "DP252": _c(E.UnsupportedQueryError, "Not on the allowlist: a node type or clause."),
    "DP253": _c(E.UnsupportedQueryError, "Not on the allowlist: a function."),
    "DP254": _c(E.UnsupportedQueryError, "Not on the allowlist: a behaviour-selecting argument that is not an accepted constant."),
    "DP255": _c(E.UnsupportedQueryError, "An output size set by the data, or a value a public statement builds past its bound."),
    "DP256": _c(E.UnsupportedQueryError, "Not on the allowlist: a cast target."),
    "DP257": _c(E.UnsupportedQueryError, "Not on the allowlist: a WITH clause, set operation or shape."),
    "DP258": _c(E.UnsupportedQueryError, "Work one row could make large (a long regex, a backtracking LIKE), rows times that work past the bound, or work on a value a public statement builds."),
    "DP259": _c(E.ParseError, "A statement longer than 256 KB or of more than 16,384 tokens, refused before it is parsed."),
    "DP260": _c(E.UnsupportedQueryError, "Spark: a query class the Spark backend does not serve."),
    "DP261": _c(E.UnsupportedQueryError, "Spark: an expression, join or shape the Spark backend does not run."),
    "DP262": _c(E.PolicyError, "Spark: a source whose columns changed since it was declared."),
    "DP263": _c(E.InterfaceError, "Spark: no Spark session was given, pyspark is not installed, or Spark cannot start or run work."),
    "DP264": _c(E.ProgrammingError, "A subgraph count whose ε, split by `interval_share`, leaves too little for the count or its error bar."),
    "DP265": _c(E.UnsupportedQueryError, "A subgraph count whose value or error bar could exceed 128-bit integers."),
    "DP266": _c(E.UnsupportedQueryError, "A statement whose work after the debit, bounded from public sizes, would pass its cap."),
    "DP267": _c(E.OperationalError, "Spark: the statement was interrupted (a cancel or a timeout) while Spark worked on it before its debit; nothing was charged."),
    "DP270": _c(E.UnsupportedQueryError, "A subgraph-count function over a table that is not a protected graph, or a graph asked for anything but subgraph counts."),
    "DP271": _c(E.UnsupportedQueryError, "A subgraph-count query whose shape dpgate does not recognise (its FROM, WHERE, triangle self-join or k-star sum)."),
    "DP272": _c(E.UnsupportedQueryError, "An option that does not apply to this kind of query."),
    "DP273": _c(E.UnsupportedQueryError, "`consistent = true` over GROUP BY keys without a declared domain."),
    "DP274": _c(E.UnsupportedQueryError, "A personalization mode this query or release cannot run with."),
    "DP275": _c((E.UnsupportedQueryError, E.ProgrammingError, E.DataError), "An ε (or ε share) too small for the mechanism to add noise safely or usefully."),
    "DP276": _c(E.UnsupportedQueryError, "A GROUP BY over more cells than dpgate releases in one query."),
    "DP277": _c(E.UnsupportedQueryError, "A top-k request with nothing to select: LIMIT 0, k above the number of items, or no columns to rank."),
    "DP278": _c(E.UnsupportedQueryError, "A top-k LIMIT, OFFSET or k that is not a whole-number literal."),
    "DP279": _c(E.UnsupportedQueryError, "An aggregate in WHERE, GROUP BY or another row expression."),
    "DP281": _c(E.PolicyError, "A release whose unit is one record over a table that keeps several rows per subject."),
    "DP282": _c((E.ProgrammingError, E.UnsupportedQueryError), "A subgraph-count function with arguments it does not take (endpoints, k)."),
    "DP283": _c(E.UnsupportedQueryError, "An aggregate with an argument it does not take: a quantile level that is not one number from 0 to 1."),
    "DP284": _c(E.UnsupportedQueryError, "A release over a column whose type or size its mechanism cannot model."),
    "DP285": _c(E.ProgrammingError, "Bad arguments to `dp_top_k_columns()`."),
    "DP286": _c(E.ProgrammingError, "A release's column list that is empty, repeats a column, or does not say which column plays a role."),
    "DP287": _c((E.ProgrammingError, E.DataError, E.NotSupportedError), "A release's parameters with which its mechanism cannot run (the message says which)."),
    # -- DP3xx: policy: the owner's declarations and the analyst's caps ----------------------------
    "DP301": _c(E.PolicyError, "The wrong privacy unit for this table."),
    "DP302": _c(E.PolicyError, "An unknown analyst, or a database without a dpgate catalog."),
    "DP303": _c(E.PolicyError, "An ε above the analyst's per-query cap."),
    "DP304": _c(E.PolicyError, "A δ above the analyst's per-query cap."),
    "DP305": _c(E.PolicyError, "A fixed test seed the owner has not allowed."),
    "DP306": _c(E.PolicyError, "The subjects cannot be split into the partitions asked for."),
    "DP307": _c(E.PolicyError, "An owner macro hides a DuckDB built-in; no statement runs until it is dropped."),
    "DP310": _c(E.PolicyError, "Owner: no such table, or it is not protected."),
    "DP311": _c(E.PolicyError, "Owner: no such column, or a graph's endpoints are the same column."),
    "DP312": _c(E.PolicyError, "Owner: a bad table option or sample order, or a column without the declared domain or bounds a release needs."),
    "DP313": _c(E.PolicyError, "Owner: a bad budget source (one of epsilon, budget_column or budget_table)."),
    "DP314": _c(E.PolicyError, "Owner: a re-declaration that would change a table's kind or privacy unit, or protect a release."),
    "DP315": _c(E.PolicyError, "Owner: bad bounds for a column."),
    "DP316": _c(E.PolicyError, "Owner: a bad domain for a column."),
    "DP317": _c(E.PolicyError, "Owner: tables that share a subject space but disagree about it."),
    "DP318": _c(E.PolicyError, "A graph's node universe is missing, too small, protected or of the wrong type."),
    "DP319": _c(E.PolicyError, "A k-clique count on a graph this large, which the owner has not allowed."),
    "DP320": _c(E.PolicyError, "Owner: a bad analyst quota or name, or a drop of a release that is not yours or is now declared."),
    "DP321": _c(E.PolicyError, "The file has no dpgate schema: it is a plain DuckDB file."),
    "DP322": _c(E.ProgrammingError, "An owner command with a bad argument."),
    "DP323": _c(E.PolicyError, "The analyst exists already."),
    "DP324": _c(E.ProgrammingError, "No policy file at that path."),
    "DP325": _c(E.PolicyError, "A bad login password or SCRAM verifier."),
    "DP326": _c(E.PolicyError, "A login for a name that is not an analyst, or an owner login named like an analyst."),
    "DP327": _c(E.PolicyError, "A generalization hierarchy that does not fit its column."),
    "DP328": _c(E.PolicyError, "An experimental mechanism the owner has not enabled, or a column without a hierarchy or domain."),
    "DP329": _c(E.PolicyError, "A privacy unit or graph endpoint DuckDB cannot compare reliably (e.g. one with a collation)."),
    "DP330": _c(E.PolicyError, "A policy file or owner declaration that is malformed or incomplete."),
    "DP340": _c(E.PolicyError, "Spark: a malformed `spark = ...` source, or a name taken by a DuckDB table with rows."),
    "DP341": _c(E.PolicyError, "Spark: a source Spark cannot read."),
    "DP342": _c(E.PolicyError, "Spark: a source with columns Spark cannot serve, or that could fail on one value (a view made with ANSI mode on, a FAILFAST text table)."),
    "DP343": _c(E.PolicyError, "A release that may write more rows than the analyst's cap on one release (`release_rows`)."),
    "DP344": _c(E.PolicyError, "A release beyond the number of releases the analyst may hold (`releases`)."),
    "DP345": _c(E.PolicyError, "A release that would take the analyst's releases past their estimated bytes (`release_bytes`)."),
    "DP346": _c(E.PolicyError, "An owner's release cap that is not a whole number from 0, or an unknown cap."),
    "DP347": _c(E.PolicyError, "An owner's budget share that is not a fraction in (0, 1], 'equal' or 'none'."),
    # -- DP4xx: the budget, and failures after the debit -------------------------------------------
    "DP401": _c(E.BudgetExceededError, "The analyst's ε quota would be exceeded."),
    "DP402": _c(E.BudgetExceededError, "The analyst's δ quota would be exceeded."),
    "DP403": _c(E.BudgetExceededError, "No subject (or graph edge budget) has enough budget left."),
    "DP404": _c(E.OperationalError, "The statement failed after its debit (a database error, or the data changed); the debit stands."),
    "DP405": _c(E.OperationalError, "The database kept changing while the statement was checked, or DuckDB failed; nothing was charged."),
    "DP406": _c(E.OperationalError, "The statement would charge more than the shell showed when it asked (a remembered answer went out of date meanwhile); nothing was charged."),
    # -- DP5xx: a bug in dpgate --------------------------------------------------------------------
    "DP500": _c(E.InternalError, "A bug in dpgate; please report it."),
    "DP501": _c(E.InternalError, "An answer withheld after its debit: its mechanisms did not report running at exactly the ε and δ debited (a bug); the debit stands."),
    # -- DP6xx: data, parameters and the database file ---------------------------------------------
    "DP600": _c(E.DataError, "A data error in a public statement."),
    "DP601": _c(E.ProgrammingError, "Parameters of the wrong kind for the placeholders (a sequence or a mapping)."),
    "DP602": _c(E.ProgrammingError, "Parameters that do not match the placeholders."),
    "DP603": _c(E.ProgrammingError, "Placeholders without parameters."),
    "DP604": _c(E.DataError, "A parameter value that cannot be used in SQL."),
    "DP605": _c(E.OperationalError, "The database could not write the debit (a full disk): nothing was charged."),
    "DP606": _c(E.OperationalError, "The database stopped while committing the debit: the debit may stand, nothing was computed."),
    "DP607": _c(E.OperationalError, "The database stopped after a failed write and must be reopened; what was committed stands."),
    "DP608": _c(E.OperationalError, "The database could not write a statement's changes: nothing of them was kept; a debit made stands."),
    "DP609": _c(E.OperationalError, "An answer computed but withheld: its release could not be logged; its debit stands."),
    "DP610": _c(E.IntegrityError, "A constraint violation in a public statement."),
    "DP611": _c(E.ProgrammingError, "`dpgate load`: no file at that path."),
    "DP612": _c(E.ProgrammingError, "`dpgate load`: an unreadable file, an unknown format or a bad table name."),
    "DP613": _c((E.ProgrammingError, E.PolicyError), "`dpgate load`: the table exists already, or is protected."),
    # -- DP7xx: the server -------------------------------------------------------------------------
    "DP701": _c(E.NotSupportedError, "Binary formats are not supported."),
    "DP702": _c(E.ProgrammingError, "An owner session runs owner commands, not SQL."),
    "DP703": _c(E.PolicyError, "An analyst may change only their own password."),
    "DP704": _c(E.ProgrammingError, "A bad or failed `dpgate` command."),
    "DP705": _c(E.ProgrammingError, "An unknown prepared statement or portal, or too many of them."),
    "DP706": _c(E.NotSupportedError, "A protocol message not supported here (e.g. COPY)."),
    "DP707": _c(E.ProgrammingError, "The transaction is aborted; commands are ignored until its end."),
    "DP708": _c(E.OperationalError, "The statement was canceled."),
    "DP709": _c(E.InternalError, "An internal error in the server."),
    "DP710": _c(E.ProgrammingError, "TLS needs both `--tls-cert` and `--tls-key`."),
    "DP711": _c(E.OperationalError, "The server reported an error without a dpgate code."),
    "DP712": _c(E.OperationalError, "Logging in to the server failed."),
    "DP713": _c(E.PolicyError, "An owner command from an analyst."),
    "DP714": _c(E.OperationalError, "A public statement's result is over the row or byte cap (`--max-result-rows`, `--max-result-mb`)."),
    "DP715": _c(E.OperationalError, "A statement waited its whole time limit for a slot of its login (`--statements-per-login`); nothing ran."),
    "DP716": _c(E.OperationalError, "A login waited 60 s for a turn of its name; nothing was checked, try again."),
    "DP717": _c(E.OperationalError, "A connection still logging in was closed to make room for a newer one."),
    "DP718": _c(E.OperationalError, "A connection took longer than the startup or login timeout."),
    "DP719": _c(E.OperationalError, "A suspended portal was closed: another statement ran while more than 64 MB of its rows were unread."),
    "DP720": _c(E.OperationalError, "`dpgate serve` or `dpgate web` cannot listen there: a port outside 0-65535, a port in use or not allowed, or a host that does not resolve."),
    "DP721": _c(E.ProgrammingError, "`dpgate serve`: the TLS certificate or key cannot be read or used."),
    "DP722": _c(E.ProgrammingError, "`dpgate web`: a request's body is larger than its route takes (64 KB; 1 MB for a statement)."),
    "DP723": _c(E.InterfaceError, "`dpgate web`: not signed in, or the session has ended (idle, too old, or signed out)."),
    "DP724": _c(E.ProgrammingError, "`dpgate web`: a request refused as cross-site: without the session's CSRF token, from another Origin, not JSON, or for another Host."),
    "DP725": _c(E.ProgrammingError, "`dpgate web`: no such page, API route or method."),
    "DP726": _c(E.ProgrammingError, "`dpgate web`: a request's body is not the JSON its route takes."),
    "DP727": _c(E.InterfaceError, "`dpgate web` needs the `web` extra (Starlette and uvicorn)."),
    "DP728": _c(E.ProgrammingError, "`dpgate web` on an address other than loopback needs TLS (`--tls-cert`, `--tls-key`)."),
    "DP729": _c(E.OperationalError, "`dpgate web` has its most sessions open; sign out of others, or wait for idle ones to end."),
    "DP730": _c(E.ProgrammingError, "`dpgate web` runs one statement at a time; the text held several."),
}
# fmt: on


def family(name: str) -> Family:
    """The family the code ``name`` belongs to."""
    return next(f for f in FAMILIES if name.startswith(f.prefix))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table() -> str:
    """The table of docs/errors.md: one row per code, a bold row opening each family."""
    lines = ["| Code | Class | Meaning |", "|---|---|---|"]
    current = None
    for name in sorted(CODES):
        fam = family(name)
        if fam is not current:
            lines.append(f"| **{fam.prefix}xx** | | **{_cell(fam.title[0].upper() + fam.title[1:])}** |")
            current = fam
        code = CODES[name]
        classes = " / ".join(f"`{c.__name__}`" for c in code.classes)
        lines.append(f"| {name} | {classes} | {_cell(code.meaning)} |")
    return "\n".join(lines) + "\n"


BEGIN = "<!-- error codes: generated by python -m dpgate.codes -->"
END = "<!-- end error codes -->"


def section() -> str:
    """What docs/errors.md holds between its markers, the markers included."""
    return f"{BEGIN}\n{table()}{END}\n"


def main() -> None:
    sys.stdout.write(section())


if __name__ == "__main__":
    main()
