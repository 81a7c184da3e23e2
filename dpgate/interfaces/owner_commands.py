"""The owner's commands as functions: each returns what it has to say, and prints nothing.

``dpgate init``, ``load``, ``protect``, ``analyst add|set|list``, ``budget``, ``policy apply``,
``ledger``, ``quality``, ``answers`` and ``login`` are argparse subcommands built here (``add_parsers``) and run
by ``run``, which returns a ``Reply``: the listings and lines of text the command answers. The CLI
prints a reply (``dpgate.interfaces.cli``); the server sends it (``dpgate.server.session``), parsing
the owner's words with ``parser()``, whose usage, help and errors come back raised instead of
written to the process's stdout or stderr, so a command's reply holds only its own output.
"""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from dpgate import errors
from dpgate.catalog import remembered, shares
from dpgate.catalog.owner import Owner
from dpgate.catalog.reports import describe_overcommit

LEDGER_COLUMNS = ["entry", "at", "analyst", "class", "mechanism", "table", "epsilon", "delta",
                  "charged", "excluded", "private", "released", "statement"]  # fmt: skip
ANALYST_COLUMNS = ["analyst", "epsilon quota", "epsilon spent", "epsilon left", "delta quota", "delta spent",
                   "epsilon per query", "delta per query", "share of subjects' epsilon"]  # fmt: skip
TABLE_COLUMNS = ["table", "kind", "unit", "subjects", "min epsilon left", "median epsilon left",
                 "max epsilon left", "subjects with none left"]  # fmt: skip


@dataclass(frozen=True)
class Listing:
    """A table an owner command lists: column names and rows (values as the catalog holds them)."""

    names: list[str]
    rows: list[tuple]


@dataclass
class Reply:
    """What an owner command answers: its listings, then its lines of text."""

    listings: list[Listing] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


#: Reads a password (the first line of stdin on the command line; the server has none).
PasswordReader = Callable[[], str]


class ArgumentsExit(Exception):
    """What argparse would have printed before exiting: usage and an error (status 2), or help (0)."""

    def __init__(self, status: int, out: str = "", err: str = ""):
        super().__init__(err or out)
        self.status, self.out, self.err = status, out, err


class _Parser(argparse.ArgumentParser):
    """argparse that raises what it would print, so no command writes to the process's streams."""

    def error(self, message: str):  # the text ArgumentParser.error writes to stderr
        raise ArgumentsExit(2, err=self.format_usage() + f"{self.prog}: error: {message}\n")

    def print_help(self, file=None) -> None:
        raise ArgumentsExit(0, out=self.format_help())

    def exit(self, status: int = 0, message: str | None = None):
        raise ArgumentsExit(status, err=message or "")


def parser() -> argparse.ArgumentParser:
    """The ``dpgate`` owner commands alone, as the server parses them (see ``_Parser``)."""
    p = _Parser(prog="dpgate")
    add_parsers(p.add_subparsers(dest="command", required=True))
    return p


def run(args: argparse.Namespace, *, read_password: PasswordReader) -> Reply:
    """Run the owner command ``args`` was parsed for (by ``add_parsers``' subcommands)."""
    return args.owner_command(args, read_password)


# -- the commands --------------------------------------------------------------------------------
def cmd_init(args: argparse.Namespace, read_password: PasswordReader) -> Reply:
    """Create dpgate's schema in a DuckDB file (owner)."""
    with Owner(args.database):
        pass
    return Reply(lines=[f"dpgate schema ready in {args.database}"])


def cmd_policy_apply(args: argparse.Namespace, read_password: PasswordReader) -> Reply:
    """Apply a TOML policy file: protected tables, domains, bounds, budgets, analysts (owner)."""
    if not os.path.isfile(args.policy):
        raise errors.ProgrammingError(f"No policy file at {args.policy!r}", code="DP324",
                                      hint="give the path of a TOML policy file (see examples/policy.toml)")  # fmt: skip
    with Owner(args.database) as owner:
        done = list(owner.apply_policy(args.policy))
        return Reply(lines=done + overcommit_notes(owner))


def overcommit_notes(owner: Owner) -> list[str]:
    """The note saying where quotas can use up subjects' budgets (none when they cannot)."""
    line = describe_overcommit(owner.overcommitted())
    return [f"note: {line}"] if line else []


def ledger(owner: Owner, analyst: str | None = None) -> Listing:
    """Every debit, newest last (of one analyst, if given)."""
    return Listing(LEDGER_COLUMNS, owner.ledger(analyst))


def budgets(owner: Owner) -> tuple[Listing, Listing]:
    """The analysts' quotas and spending; each protected table's subjects' remaining ε."""
    analysts, tables = owner.budgets()
    return Listing(ANALYST_COLUMNS, analysts), Listing(TABLE_COLUMNS, tables)


def cmd_ledger(args: argparse.Namespace, read_password: PasswordReader) -> Reply:
    """Print the ledger: every debit, who made it, what it cost, whether it was released (owner)."""
    with Owner(args.database, create=False, read_only=True) as owner:
        return Reply([ledger(owner, args.analyst)])


def cmd_budget(args: argparse.Namespace, read_password: PasswordReader) -> Reply:
    """The analysts' quotas and spending, and each protected table's subjects' remaining ε (owner);
    ``--share`` sets the database's default share of each subject's ε an analyst may use."""
    with Owner(args.database, create=False, read_only=args.share is None) as owner:
        lines = []
        if args.share is not None:
            owner.set_budget_share(args.share)
            lines.append(f"budget share: each analyst may use {_share_words(args.share)} unless set for them")
        return Reply(list(budgets(owner)), lines + overcommit_notes(owner))


def _share_words(share: str) -> str:
    value = shares.parse(share)
    if value == "none":
        return "the whole of each subject's lifetime ε"
    if value == "equal":
        return "1 / (the number of analysts) of each subject's lifetime ε"
    return f"{value} of each subject's lifetime ε"


def cmd_answers(args: argparse.Namespace, read_password: PasswordReader) -> Reply:
    """How analysts' DP answers are remembered and given again for free; change it, or forget them (owner)."""
    lines = []
    setting = any(v is not None for v in (args.set_mode, args.max, args.max_bytes, args.max_age))
    with Owner(args.database, create=False, read_only=not (setting or args.forget is not None)) as owner:
        if args.forget is not None:
            n = owner.forget_answers(args.forget or None)
            whose = f"{args.forget}'s" if args.forget else "every analyst's"
            lines.append(f"forgot {n:,} of {whose} remembered answers (the ledger keeps what was paid)")
        if setting:
            owner.set_answer_memory(args.set_mode, max_entries=args.max, max_bytes=args.max_bytes, max_age=args.max_age)
        memory = remembered.settings(owner.con)
        counts = remembered.summary(owner.con)
    age = f"; drawn afresh after {memory.max_age:,} seconds" if memory.max_age else ""
    lines.append(f"answers are remembered: {_MODE_WORDS[memory.mode]}; at most {memory.max_entries:,} answers "
                 f"and {memory.max_bytes:,} bytes per analyst{age}")  # fmt: skip
    return Reply([Listing(["analyst", "answers remembered", "bytes", "latest released at"], counts)], lines)


_MODE_WORDS = {
    "own": "each analyst gets their own again for free (own)",
    "shared": "any analyst's answer is free for everyone (shared)",
    "off": "no (off): every statement is drawn afresh and charged",
}


def cmd_load(args: argparse.Namespace, read_password: PasswordReader) -> Reply:
    """Bring a CSV, Parquet or JSON file in as a table (owner); `dpgate protect` declares it."""
    with Owner(args.database) as owner:
        n = owner.load(args.table, args.file, replace=args.replace, format=args.format)
    return Reply(lines=[f"{args.table}: {n:,} rows loaded from {args.file}"])


def _pairs(items: list[str] | None, what: str) -> dict[str, list[str]]:
    out = {}
    for item in items or []:
        col, sep, rest = item.partition("=")
        if not sep or not col or not rest:
            raise errors.ProgrammingError(f"--{what} {item!r}: write column=value,value", code="DP322")
        out[col.strip().lower()] = [v.strip() for v in rest.split(",")]
    return out


def _number_or_text(v: str):
    try:
        f = float(v)
    except ValueError:
        return v
    return int(f) if f.is_integer() and "." not in v and "e" not in v.lower() else f


def cmd_protect(args: argparse.Namespace, read_password: PasswordReader) -> Reply:
    """Declare a table protected: its privacy unit, contribution bounds, budgets, bounds and domains (owner)."""
    bounds = {}
    for col, vals in _pairs(args.bounds, "bounds").items():
        if len(vals) != 2:
            raise errors.ProgrammingError(f"--bounds {col}: give two values, lower,upper", code="DP322")
        bounds[col] = tuple(_number_or_text(v) for v in vals)
    domains = {col: [_number_or_text(v) for v in vals] for col, vals in _pairs(args.domain, "domain").items()}
    if args.budget_table is None and (args.budget_unit is not None or args.budget_epsilon_column != "epsilon"):
        raise errors.ProgrammingError("--budget-unit and --budget-epsilon-column describe a --budget-table",
                                      code="DP322", hint="give --budget-table TABLE too, or leave them out")  # fmt: skip
    if args.budget_column is not None and args.epsilon is not None:
        raise errors.ProgrammingError("--budget-column gives every subject a budget: --epsilon would be ignored",
                                      code="DP322", hint="leave out --epsilon (it is the default of subjects a "
                                      "--budget-table does not list)")  # fmt: skip
    with Owner(args.database) as owner:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", errors.RosterWarning)  # the reply's note says it
            owner.protect(args.table, unit=args.unit, max_rows=args.max_rows, max_groups=args.max_groups,
                          epsilon=args.epsilon, subjects=args.subjects, public_roster=args.public_roster,
                          bounds=bounds or None, domains=domains or None, sample_order=args.sample_order,
                          budget_column=args.budget_column, budget_table=args.budget_table,
                          budget_table_unit=args.budget_unit, budget_table_column=args.budget_epsilon_column)  # fmt: skip
        # the roster's size (a budget table can list subjects who have no rows yet)
        roster = owner.catalog().tables[args.table.lower()].roster_table_sql
        (subjects,) = owner.con.execute(f"SELECT count(*) FROM {roster}").fetchone()
        overcommitted = overcommit_notes(owner)
    lines = [f"{args.table} is protected: unit {args.unit}, at most {args.max_rows} row(s) per subject, "
             f"{subjects:,} subjects on its roster"]  # fmt: skip
    if not args.public_roster:
        lines.append("note: the number of subjects becomes public (SHOW BUDGET shows it); "
                     "pass --public-roster if it is public already")  # fmt: skip
    lines += overcommitted
    return Reply(lines=lines)


def cmd_analyst(args: argparse.Namespace, read_password: PasswordReader) -> Reply:
    """Add an analyst, change their quotas, or list them (owner)."""
    if args.analyst_command == "list":
        with Owner(args.database, create=False, read_only=True) as owner:
            return Reply([budgets(owner)[0]])
    with Owner(args.database, create=args.analyst_command == "add") as owner:
        known = owner.con.execute("SELECT count(*) FROM dpgate.analysts WHERE name = ?", [args.name]).fetchone()[0]
        if args.analyst_command == "add" and known:
            raise errors.PolicyError(f"Analyst {args.name!r} exists already", code="DP323",
                                     hint=f"dpgate analyst set {args.database} {args.name} --epsilon ...")  # fmt: skip
        if args.analyst_command == "set":
            if not known:
                raise errors.PolicyError(f"Unknown analyst {args.name!r}", code="DP302",
                                         hint=f"dpgate analyst add {args.database} {args.name} --epsilon ...")  # fmt: skip
            row = owner.con.execute("SELECT epsilon_quota, delta_quota, epsilon_per_query, delta_per_query "
                                    "FROM dpgate.analysts WHERE name = ?", [args.name]).fetchone()  # fmt: skip
            cur = dict(zip(("epsilon", "delta", "epsilon_per_query", "delta_per_query"), map(float, row)))
        else:
            cur = {"epsilon": None, "delta": 1e-5, "epsilon_per_query": None, "delta_per_query": None}
        new = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in cur.items()}
        if new["epsilon"] is None:
            raise errors.ProgrammingError("An analyst needs a lifetime quota", code="DP322", hint="pass --epsilon E")
        password = _password(read_password) if getattr(args, "password_stdin", False) else None
        caps = {k: getattr(args, k) for k in ("release_rows", "releases", "release_bytes") if getattr(args, k) is not None}
        own = shares.own_share(args.share)  # a bad share changes nothing (DP347), not even the quotas
        owner.add_analyst(args.name, **new)
        if caps:
            owner.set_release_caps(args.name, **caps)
        if args.share is not None:  # "default" (own None) follows the database's share again
            owner.set_budget_share(own, args.name)
        share = owner.budget_share(args.name)
        if password is not None:
            owner.set_login(args.name, password=password)
        held = owner.release_caps(args.name)
        overcommitted = overcommit_notes(owner)
    lines = [f"analyst {args.name}: ε quota {new['epsilon']:g}, δ quota {new['delta']:g}"
             + (f"; share of each subject's ε: {share}" if not share.startswith("none") else "")
             + ("; can log in to dpgate serve" if password is not None else "")]  # fmt: skip
    lines += overcommitted
    if caps:
        lines.append(f"release caps: {held['release_rows']:,} rows a release, {held['releases']:,} releases, "
                     f"{held['release_bytes']:,} bytes (estimated) in all")  # fmt: skip
    return Reply(lines=lines)


def _password(read_password: PasswordReader) -> str:
    """A login password, never taken from the command line (where ps shows it)."""
    line = read_password()
    if len(line) < 8:
        raise errors.PolicyError("A login password needs at least 8 characters (read from stdin)", code="DP325",
                                 hint="echo \"$PASSWORD\" | dpgate ... --password-stdin")  # fmt: skip
    return line


def cmd_login(args: argparse.Namespace, read_password: PasswordReader) -> Reply:
    """Let an analyst (or, with --owner, an owner) log in to `dpgate serve`; the password comes on stdin."""
    password = _password(read_password)
    with Owner(args.database, create=False, read_only=True) as owner:
        owner.set_login(args.name, password=password, owner=args.owner)
    return Reply(lines=[f"{'owner' if args.owner else 'analyst'} {args.name} can log in to dpgate serve "
                        "(SCRAM-SHA-256 verifier stored)"])  # fmt: skip


def cmd_quality(args: argparse.Namespace, read_password: PasswordReader) -> Reply:
    """Compare a release with its source: average TVD of its 1-, 2- and 3-way marginals (owner; reads raw data);
    a generalized release's information loss."""
    with Owner(args.database, create=False, read_only=True) as owner:
        report = owner.quality(args.release)
    if "certainty_penalty" in report:  # a generalized release: its information loss, from public tables
        lines = [f"release {args.release}: {report['rows']:,} generalized rows; source {report['source']}"]
        lines += [f"{c}: '*' in {report['suppressed'][c]:.1%} of rows, certainty penalty {p:.3f}"
                  for c, p in report["certainty_penalty"].items()]  # fmt: skip
        lines.append(f"mean certainty penalty {report['mean_certainty_penalty']:.3f} (0: exact values, 1: all '*'); "
                     f"discernibility {report['discernibility']:.4g} (Σ class² / rows², 1/rows at best)")  # fmt: skip
        return Reply(lines=lines)
    lines = [f"release {args.release}: {report['rows_release']:,} rows; source {report['source']}: "
             f"{report['rows_source']:,} rows; {report['columns']} columns"]  # fmt: skip
    for way in (1, 2, 3):
        value = report.get(f"tvd_{way}way")
        if value is not None:
            lines.append(f"average total variation distance, {way}-way marginals: {value:.4f}")
    lines.append("(computed from the raw data: these figures are not differentially private; keep them to the owner)")
    return Reply(lines=lines)


# -- the parsers ---------------------------------------------------------------------------------
def output_options(parser: argparse.ArgumentParser, mode_help: str | None = None) -> None:
    """--mode, --wide and --expanded, the same on every command that prints a table."""
    parser.add_argument("--mode", choices=["table", "csv", "json"], default="table", help=mode_help)
    parser.add_argument("--wide", action="store_true", help="never narrow a table to the terminal's width")
    parser.add_argument("--expanded", choices=["auto", "on", "off"], default="auto",
                        help="one record per block, as psql's \\x: auto (default) when a table cannot fit the "
                        "terminal, on always, off never (a pipe or file gets the table unless on)")  # fmt: skip


def add_parsers(sub) -> None:
    """Add the owner's subcommands to ``sub`` (an ``add_subparsers`` action), in the CLI's order."""
    i = sub.add_parser("init", help=cmd_init.__doc__, description=cmd_init.__doc__)
    i.add_argument("database")
    i.set_defaults(owner_command=cmd_init)

    pol = sub.add_parser("policy", help="owner: apply a policy file")
    polsub = pol.add_subparsers(dest="policy_command", required=True)
    pa = polsub.add_parser("apply", help=cmd_policy_apply.__doc__, description=cmd_policy_apply.__doc__)
    pa.add_argument("database")
    pa.add_argument("policy")
    pa.set_defaults(owner_command=cmd_policy_apply)

    qu = sub.add_parser("quality", help=cmd_quality.__doc__, description=cmd_quality.__doc__)
    qu.add_argument("database")
    qu.add_argument("release")
    qu.set_defaults(owner_command=cmd_quality)

    lg = sub.add_parser("ledger", help=cmd_ledger.__doc__, description=cmd_ledger.__doc__)
    lg.add_argument("database")
    lg.add_argument("--analyst")
    output_options(lg, "csv and json keep every id, ε and statement whole")
    lg.set_defaults(owner_command=cmd_ledger)

    bu = sub.add_parser("budget", help=cmd_budget.__doc__, description=cmd_budget.__doc__)
    bu.add_argument("database")
    bu.add_argument("--share", metavar="S", help="set the database's default share of each subject's lifetime ε "
                    "an analyst may use: a fraction in (0, 1], 'equal' (1 / the number of analysts) or 'none'")
    output_options(bu)
    bu.set_defaults(owner_command=cmd_budget)

    aw = sub.add_parser("answers", help=cmd_answers.__doc__, description=cmd_answers.__doc__)
    aw.add_argument("database")
    aw.add_argument("--mode", dest="set_mode", choices=["own", "shared", "off"],
                    help="own: each analyst's answers for themselves (default); shared: for everyone; off: none")
    aw.add_argument("--max", type=int, metavar="N", help="keep at most N answers per analyst (the oldest go first)")
    aw.add_argument("--max-bytes", type=int, metavar="B", help="keep at most B stored bytes of answers per analyst")
    aw.add_argument("--max-age", type=int, metavar="S",
                    help="draw an answer afresh S seconds after its release (0: no limit); for data changed with "
                    "plain SQL, which dpgate does not notice")  # fmt: skip
    aw.add_argument("--forget", nargs="?", const="", metavar="ANALYST",
                    help="forget remembered answers (one analyst's, or everyone's)")
    aw.set_defaults(owner_command=cmd_answers, mode="table", wide=False)

    lo = sub.add_parser("load", help=cmd_load.__doc__, description=cmd_load.__doc__)
    lo.add_argument("database")
    lo.add_argument("table")
    lo.add_argument("file")
    lo.add_argument("--replace", action="store_true", help="replace a table of that name")
    lo.add_argument("--format", choices=["csv", "parquet", "json"], help="default: from the file's extension")
    lo.set_defaults(owner_command=cmd_load)

    pr = sub.add_parser("protect", help=cmd_protect.__doc__, description=cmd_protect.__doc__)
    pr.add_argument("database")
    pr.add_argument("table")
    pr.add_argument("--unit", required=True, help="the privacy unit column (one person)")
    pr.add_argument("--max-rows", type=int, default=1, help="rows a subject contributes to a query (default 1)")
    pr.add_argument("--max-groups", type=int, help="GROUP BY cells a subject may count in")
    pr.add_argument("--epsilon", type=float, help="every subject's lifetime ε (with --budget-table: the ε of "
                    "subjects it does not list)")
    pr.add_argument("--budget-column", metavar="COL", help="each subject's lifetime ε from a column of the table "
                    "(the smallest value among the subject's rows)")
    pr.add_argument("--budget-table", metavar="TABLE", help="each subject's lifetime ε from a table of "
                    "(unit, epsilon) rows")
    pr.add_argument("--budget-unit", metavar="COL", help="--budget-table's column of units (default: --unit)")
    pr.add_argument("--budget-epsilon-column", metavar="COL", default="epsilon",
                    help="--budget-table's column of ε (default: epsilon)")
    pr.add_argument("--subjects", help="the subject space shared with other tables of the same people")
    pr.add_argument("--public-roster", action="store_true", help="the number of subjects is public already")
    pr.add_argument("--bounds", action="append", metavar="COL=LO,HI", help="repeatable; numbers or dates")
    pr.add_argument("--domain", action="append", metavar="COL=V1,V2,...", help="repeatable")
    pr.add_argument("--sample-order", choices=["per_query", "stored"],
                    help="stored (the default for a table of the database file or in Spark): the same rows "
                    "of each subject for every query, from a kept random order (until the table changes) or, "
                    "for a Spark table, a kept key (until it is protected again); per_query: a fresh sample for each query")
    pr.set_defaults(owner_command=cmd_protect)

    an = sub.add_parser("analyst", help="owner: add, change or list analysts")
    ansub = an.add_subparsers(dest="analyst_command", required=True)
    for verb in ("add", "set"):
        a = ansub.add_parser(verb, help=f"{verb} an analyst's quotas")
        a.add_argument("database")
        a.add_argument("name")
        a.add_argument("--epsilon", type=float, help="lifetime ε quota")
        a.add_argument("--delta", type=float, help="lifetime δ quota (default 1e-5)")
        a.add_argument("--epsilon-per-query", type=float)
        a.add_argument("--delta-per-query", type=float)
        a.add_argument("--password-stdin", action="store_true",
                       help="read a password for dpgate serve from stdin (only its SCRAM verifier is stored)")
        a.add_argument("--release-rows", type=int, metavar="N",
                       help="rows one synthetic release of theirs may write (default 1,000,000)")
        a.add_argument("--releases", type=int, metavar="N", help="releases they may hold at once (default 100)")
        a.add_argument("--release-bytes", type=int, metavar="N",
                       help="estimated bytes their releases may hold in all (default 1 GiB)")
        a.add_argument("--share", metavar="S",
                       help="the share of each subject's lifetime ε they may use: a fraction in (0, 1], 'equal' "
                       "(1 / the number of analysts), 'none' (the whole budget) or 'default' (the database's)")
        a.set_defaults(owner_command=cmd_analyst)
    al = ansub.add_parser("list", help="the analysts and their quotas")
    al.add_argument("database")
    output_options(al)
    al.set_defaults(owner_command=cmd_analyst)

    lg_ = sub.add_parser("login", help=cmd_login.__doc__, description=cmd_login.__doc__)
    lg_.add_argument("database")
    lg_.add_argument("name", help="an analyst's name, or with --owner a name for an owner login")
    lg_.add_argument("--owner", action="store_true", help="an owner login: owner commands over the server")
    lg_.add_argument("--password-stdin", action="store_true", required=True,
                     help="read the password from stdin (required: never on the command line)")
    lg_.set_defaults(owner_command=cmd_login)
