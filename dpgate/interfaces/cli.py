"""The ``dpgate`` command: a thin layer over the library.

Analyst commands: ``shell``, ``query``, ``explain``, ``demo``. Owner commands: ``init``,
``load``, ``protect``, ``analyst add|set|list``, ``budget``, ``policy apply``, ``ledger``,
``quality``, ``login``; ``serve`` runs the PostgreSQL-protocol server. Commands that only read never add dpgate's schema to a file; a command that created
the database file and then failed removes it. argparse (the standard library) is enough for
these commands and adds no dependency. dpgate errors print as ``error DPxxx: message`` plus a hint,
with exit status 1; nothing is charged for a refused statement.
"""

from __future__ import annotations


import argparse
import os
import shutil
import sys
import warnings
from collections.abc import Sequence

from dpgate import __version__, errors
from dpgate.catalog.tables import quote_ident


def _print_error(e: errors.Error) -> int:
    print(f"error {e.code}: {e.message}", file=sys.stderr)
    if e.hint:
        print(f"hint: {e.hint}", file=sys.stderr)
    return 1


def _width(wide: bool = False) -> int | None:
    """The terminal's width for tables, or None (no fitting) with --wide or when the output is
    not a terminal (a pipe or file gets whole values) unless COLUMNS says how wide to be."""
    if wide or not (sys.stdout.isatty() or os.environ.get("COLUMNS")):
        return None
    return shutil.get_terminal_size((160, 24)).columns


def print_result(result, *, mode: str = "table", intervals: bool = True, max_width: int | None = None,
                 out=None, err=None) -> None:  # fmt: skip
    """Print a result in one of the three modes, never dropping what a DP answer says about itself.

    ``table``: the table, its cost, population and notes on ``out``. ``json``: one envelope on
    ``out``. ``csv``: the rows on ``out``; the message, cost, population and notes on ``err``,
    one line each after ``# `` (so ``> file.csv`` keeps them on the screen).
    """
    from dpgate.interfaces.render import format_result, release_lines

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    if mode != "csv":
        print(format_result(result, intervals=intervals, mode=mode, max_width=max_width), file=out)
        return
    text = format_result(result, intervals=intervals, mode="csv")
    if text:
        print(text, file=out)
    out.flush()
    free_notes = result.message and (not result.columns or result.release is None)  # e.g. from a synopsis
    side = (result.message.splitlines() if free_notes else []) + release_lines(result)
    for line in side:
        print(f"# {line}", file=err)


def cmd_query(args: argparse.Namespace) -> int:
    """Run one statement as an analyst and print the answer with its error bars, cost and population."""
    from dpgate import connect
    from dpgate.interfaces.progress import ProgressBar

    with connect(args.database, analyst=args.analyst, progress=ProgressBar(sys.stderr)) as con:
        cur = con.cursor()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", errors.PopulationWarning)  # the population line says it
            cur.execute(args.sql)
        print_result(cur.result, mode=args.mode, intervals=not args.no_intervals, max_width=_width(args.wide))
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    """Show what a query would cost, its mechanism and its error bars; spends nothing."""
    from dpgate import connect

    sql = args.sql.strip().rstrip(";")
    if not sql.upper().startswith("EXPLAIN PRIVACY"):
        sql = "EXPLAIN PRIVACY " + sql
    with connect(args.database, analyst=args.analyst) as con:
        cur = con.cursor()
        cur.execute(sql)
        print_result(cur.result, mode=args.mode, max_width=_width(args.wide))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Build a fresh demo database (or keep the existing one with --keep) and run a short tour of DP queries on it."""
    from dpgate.interfaces import demo

    path = demo.build(args.db, force=not args.keep)
    if args.no_tour:
        print(path)
        return 0
    demo.tour(path, max_width=_width())
    print(f"Demo database: {path}")
    print(f'Try:  dpgate query {demo.shell_quote(path)} --analyst demo "{demo.TRY_QUERY}"')
    print(f"      dpgate shell --demo{'' if args.db is None else ' ' + demo.shell_quote(path)}"
          "    (an interactive SQL shell on it; `dpgate demo` again starts from a fresh database)")  # fmt: skip
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    """Create dpgate's schema in a DuckDB file (owner)."""
    from dpgate.catalog.owner import Owner

    with Owner(args.database):
        pass
    print(f"dpgate schema ready in {args.database}")
    return 0


def cmd_policy_apply(args: argparse.Namespace) -> int:
    """Apply a TOML policy file: protected tables, domains, bounds, budgets, analysts (owner)."""
    from dpgate.catalog.owner import Owner

    if not os.path.isfile(args.policy):
        raise errors.ProgrammingError(f"No policy file at {args.policy!r}", code="DP324",
                                      hint="give the path of a TOML policy file (see examples/policy.toml)")  # fmt: skip
    with Owner(args.database) as owner:
        for line in owner.apply_policy(args.policy):
            print(line)
    return 0


def _owner_table(names: list[str], rows: list[tuple], mode: str, wide: bool = False) -> None:
    """An owner listing: a table fitted to the terminal, or csv / json with every value whole."""
    import csv
    import json

    from decimal import Decimal

    from dpgate.interfaces.render import format_table, format_value

    def plain(v):  # exact decimals as plain digits (1E-5 -> 0.00001, 0E-18 -> 0)
        return format(v.normalize(), "f") if isinstance(v, Decimal) else v

    numeric = [all(isinstance(r[j], (int, float, Decimal)) and not isinstance(r[j], bool) for r in rows)
               for j in range(len(names))] if rows else None  # fmt: skip
    rows = [tuple(plain(v) for v in r) for r in rows]
    if mode == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(names)
        w.writerows([["" if v is None else str(v) for v in r] for r in rows])
    elif mode == "json":
        print(json.dumps([{n: (None if v is None else v if isinstance(v, (int, bool)) else str(v))
                           for n, v in zip(names, r)} for r in rows], ensure_ascii=False, indent=1))  # fmt: skip
    else:
        print(format_table(names, [[format_value(v) for v in r] for r in rows], numeric, max_width=_width(wide)))


def cmd_ledger(args: argparse.Namespace) -> int:
    """Print the ledger: every debit, who made it, what it cost, whether it was released (owner)."""
    from dpgate.catalog.owner import Owner

    with Owner(args.database, create=False, read_only=True) as owner:
        rows = owner.ledger(args.analyst)
    names = ["entry", "at", "analyst", "class", "mechanism", "table", "epsilon", "delta",
             "charged", "excluded", "private", "released", "statement"]  # fmt: skip
    _owner_table(names, rows, args.mode, args.wide)
    return 0


def cmd_budget(args: argparse.Namespace) -> int:
    """The analysts' quotas and spending, and each protected table's subjects' remaining ε (owner)."""
    from dpgate.catalog.owner import Owner

    with Owner(args.database, create=False, read_only=True) as owner:
        analysts, tables = owner.budgets()
    _owner_table(["analyst", "epsilon quota", "epsilon spent", "epsilon left", "delta quota", "delta spent",
                  "epsilon per query", "delta per query"], analysts, args.mode, args.wide)  # fmt: skip
    if args.mode == "table":
        print()
    _owner_table(["table", "kind", "unit", "subjects", "min epsilon left", "median epsilon left",
                  "max epsilon left", "subjects with none left"], tables, args.mode, args.wide)  # fmt: skip
    return 0


def cmd_load(args: argparse.Namespace) -> int:
    """Bring a CSV, Parquet or JSON file in as a table (owner); `dpgate protect` declares it."""
    from dpgate.catalog.owner import Owner

    with Owner(args.database) as owner:
        n = owner.load(args.table, args.file, replace=args.replace, format=args.format)
    print(f"{args.table}: {n:,} rows loaded from {args.file}")
    return 0


def _pairs(items: list[str] | None, what: str) -> dict[str, list[str]]:
    out = {}
    for item in items or []:
        col, sep, rest = item.partition("=")
        if not sep or not col or not rest:
            raise errors.ProgrammingError(f"--{what} {item!r}: write column=value,value", code="DP322")
        out[col.strip().lower()] = [v.strip() for v in rest.split(",")]
    return out


def cmd_protect(args: argparse.Namespace) -> int:
    """Declare a table protected: its privacy unit, contribution bounds, budgets, bounds and domains (owner)."""
    from dpgate.catalog.owner import Owner

    bounds = {}
    for col, vals in _pairs(args.bounds, "bounds").items():
        if len(vals) != 2:
            raise errors.ProgrammingError(f"--bounds {col}: give two values, lower,upper", code="DP322")
        bounds[col] = tuple(_number_or_text(v) for v in vals)
    domains = {col: [_number_or_text(v) for v in vals] for col, vals in _pairs(args.domain, "domain").items()}
    with Owner(args.database) as owner:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", errors.RosterWarning)
            owner.protect(args.table, unit=args.unit, max_rows=args.max_rows, max_groups=args.max_groups,
                          epsilon=args.epsilon, subjects=args.subjects, public_roster=args.public_roster,
                          bounds=bounds or None, domains=domains or None,
                          sample_order=args.sample_order)  # fmt: skip
        (subjects,) = owner.con.execute(
            "SELECT count(*) FROM (SELECT DISTINCT " + _q(args.unit) + " FROM main." + _q(args.table.lower()) + ")"
        ).fetchone()
    print(f"{args.table} is protected: unit {args.unit}, at most {args.max_rows} row(s) per subject, "
          f"{subjects:,} subjects on its roster")  # fmt: skip
    if not args.public_roster:
        print("note: the number of subjects becomes public (SHOW BUDGET shows it); pass --public-roster if it is public already")
    return 0


_q = quote_ident


def _number_or_text(v: str):
    try:
        f = float(v)
    except ValueError:
        return v
    return int(f) if f.is_integer() and "." not in v and "e" not in v.lower() else f


def cmd_analyst(args: argparse.Namespace) -> int:
    """Add an analyst, change their quotas, or list them (owner)."""
    from dpgate.catalog.owner import Owner

    if args.analyst_command == "list":
        with Owner(args.database, create=False, read_only=True) as owner:
            analysts, _ = owner.budgets()
        _owner_table(["analyst", "epsilon quota", "epsilon spent", "epsilon left", "delta quota", "delta spent",
                      "epsilon per query", "delta per query"], analysts, args.mode, args.wide)  # fmt: skip
        return 0
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
        password = _read_password(args) if getattr(args, "password_stdin", False) else None
        caps = {k: getattr(args, k) for k in ("release_rows", "releases", "release_bytes") if getattr(args, k) is not None}
        owner.add_analyst(args.name, **new)
        if caps:
            owner.set_release_caps(args.name, **caps)
        if password is not None:
            owner.set_login(args.name, password=password)
        held = owner.release_caps(args.name)
    print(f"analyst {args.name}: ε quota {new['epsilon']:g}, δ quota {new['delta']:g}"
          + ("; can log in to dpgate serve" if password is not None else ""))  # fmt: skip
    if caps:
        print(f"release caps: {held['release_rows']:,} rows a release, {held['releases']:,} releases, "
              f"{held['release_bytes']:,} bytes (estimated) in all")  # fmt: skip
    return 0


def _read_password(args: argparse.Namespace) -> str:
    """The password on stdin (its first line); never on the command line, where ps shows it."""
    line = sys.stdin.readline().rstrip("\r\n")
    if len(line) < 8:
        raise errors.PolicyError("A login password needs at least 8 characters (read from stdin)", code="DP325",
                                 hint="echo \"$PASSWORD\" | dpgate ... --password-stdin")  # fmt: skip
    return line


def cmd_login(args: argparse.Namespace) -> int:
    """Let an analyst (or, with --owner, an owner) log in to `dpgate serve`; the password comes on stdin."""
    from dpgate.catalog.owner import Owner

    password = _read_password(args)
    with Owner(args.database, create=False, read_only=True) as owner:
        owner.set_login(args.name, password=password, owner=args.owner)
    print(f"{'owner' if args.owner else 'analyst'} {args.name} can log in to dpgate serve (SCRAM-SHA-256 verifier stored)")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the database to PostgreSQL clients (psql, psycopg, BI tools); analysts log in with SCRAM."""
    from dpgate.server import serve

    if bool(args.tls_cert) != bool(args.tls_key):
        raise errors.ProgrammingError("TLS needs both --tls-cert and --tls-key", code="DP710")
    tls = serve.tls_context(args.tls_cert, args.tls_key) if args.tls_cert else None

    def ready(server):
        names = server.logins()
        where = f"{server.host}:{server.port}"
        print(f"dpgate serve: {server.path} on {where}{' (TLS required)' if tls else ''}; "
              f"{len(names)} login(s). Ctrl-C stops.", flush=True)  # fmt: skip
        if not names:
            print(f"note: nobody can log in yet: echo \"$PASSWORD\" | dpgate login {args.database} NAME --password-stdin",
                  flush=True)  # fmt: skip
        print(f"connect: psql \"postgresql://NAME@{where}/dpgate\"", flush=True)

    limits = {"statement_timeout": args.statement_timeout, "public_timeout": args.public_timeout,
              "max_result_rows": args.max_result_rows, "max_result_bytes": int(args.max_result_mb * 2**20),
              "statements_per_login": args.statements_per_login}  # fmt: skip
    for flag in ("statement_timeout", "public_timeout", "max_result_rows", "max_result_mb", "statements_per_login"):
        if not getattr(args, flag) > 0:
            raise errors.ProgrammingError(f"--{flag.replace('_', '-')} must be positive", code="DP322",
                                          hint="dpgate serve --help lists the limits and their defaults")  # fmt: skip
    serve.run(args.database, host=args.host, port=args.port, tls=tls, ready=ready, **limits)
    return 0


def cmd_quality(args: argparse.Namespace) -> int:
    """Compare a release with its source: average TVD of its 1-, 2- and 3-way marginals (owner; reads raw data)."""
    from dpgate.catalog.owner import Owner

    with Owner(args.database, create=False, read_only=True) as owner:
        report = owner.quality(args.release)
    print(f"release {args.release}: {report['rows_release']:,} rows; source {report['source']}: "
          f"{report['rows_source']:,} rows; {report['columns']} columns")  # fmt: skip
    for way in (1, 2, 3):
        value = report.get(f"tvd_{way}way")
        if value is not None:
            print(f"average total variation distance, {way}-way marginals: {value:.4f}")
    print("(computed from the raw data: these figures are not differentially private; keep them to the owner)")
    return 0


def cmd_shell(args: argparse.Namespace) -> int:
    """The interactive SQL shell: completion, highlighting, history, the budget always in view."""
    from dpgate.interfaces.shell import run_shell

    return run_shell(args)


def _output_options(parser: argparse.ArgumentParser, mode_help: str | None = None) -> None:
    """--mode and --wide, the same on every command that prints a table."""
    parser.add_argument("--mode", choices=["table", "csv", "json"], default="table", help=mode_help)
    parser.add_argument("--wide", action="store_true", help="never narrow a table to the terminal's width")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dpgate",
        description="Differentially private SQL over DuckDB, with per-analyst quotas and per-subject budgets.",
    )
    p.add_argument("--version", action="version", version=f"dpgate {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    q = sub.add_parser("query", help=cmd_query.__doc__, description=cmd_query.__doc__)
    q.add_argument("database")
    q.add_argument("sql")
    q.add_argument("--analyst", required=True)
    q.add_argument("--no-intervals", action="store_true", help="print values without their intervals")
    _output_options(q)
    q.set_defaults(func=cmd_query)

    e = sub.add_parser("explain", help=cmd_explain.__doc__, description=cmd_explain.__doc__)
    e.add_argument("database")
    e.add_argument("sql")
    e.add_argument("--analyst", required=True)
    _output_options(e)
    e.set_defaults(func=cmd_explain)

    d = sub.add_parser("demo", help=cmd_demo.__doc__, description=cmd_demo.__doc__)
    d.add_argument("--db", help="where to write the demo database (default: your data directory)")
    d.add_argument("--keep", action="store_true",
                   help="keep the existing demo database and what it has spent (default: start from a fresh one)")
    d.add_argument("--rebuild", action="store_true", help=argparse.SUPPRESS)  # the default since 0.7
    d.add_argument("--no-tour", action="store_true", help="only build the database and print its path")
    d.set_defaults(func=cmd_demo)

    s = sub.add_parser("shell", help=cmd_shell.__doc__, description=cmd_shell.__doc__)
    s.add_argument("database", nargs="?", help="the database (with --demo: where the demo database is)")
    s.add_argument("--analyst")
    s.add_argument("--demo", action="store_true", help="open the demo database as analyst 'demo'")
    s.set_defaults(func=cmd_shell)

    i = sub.add_parser("init", help=cmd_init.__doc__, description=cmd_init.__doc__)
    i.add_argument("database")
    i.set_defaults(func=cmd_init)

    pol = sub.add_parser("policy", help="owner: apply a policy file")
    polsub = pol.add_subparsers(dest="policy_command", required=True)
    pa = polsub.add_parser("apply", help=cmd_policy_apply.__doc__, description=cmd_policy_apply.__doc__)
    pa.add_argument("database")
    pa.add_argument("policy")
    pa.set_defaults(func=cmd_policy_apply)

    qu = sub.add_parser("quality", help=cmd_quality.__doc__, description=cmd_quality.__doc__)
    qu.add_argument("database")
    qu.add_argument("release")
    qu.set_defaults(func=cmd_quality)

    lg = sub.add_parser("ledger", help=cmd_ledger.__doc__, description=cmd_ledger.__doc__)
    lg.add_argument("database")
    lg.add_argument("--analyst")
    _output_options(lg, "csv and json keep every id, ε and statement whole")
    lg.set_defaults(func=cmd_ledger)

    bu = sub.add_parser("budget", help=cmd_budget.__doc__, description=cmd_budget.__doc__)
    bu.add_argument("database")
    _output_options(bu)
    bu.set_defaults(func=cmd_budget)

    lo = sub.add_parser("load", help=cmd_load.__doc__, description=cmd_load.__doc__)
    lo.add_argument("database")
    lo.add_argument("table")
    lo.add_argument("file")
    lo.add_argument("--replace", action="store_true", help="replace a table of that name")
    lo.add_argument("--format", choices=["csv", "parquet", "json"], help="default: from the file's extension")
    lo.set_defaults(func=cmd_load)

    pr = sub.add_parser("protect", help=cmd_protect.__doc__, description=cmd_protect.__doc__)
    pr.add_argument("database")
    pr.add_argument("table")
    pr.add_argument("--unit", required=True, help="the privacy unit column (one person)")
    pr.add_argument("--max-rows", type=int, default=1, help="rows a subject contributes to a query (default 1)")
    pr.add_argument("--max-groups", type=int, help="GROUP BY cells a subject may count in")
    pr.add_argument("--epsilon", type=float, help="every subject's lifetime ε")
    pr.add_argument("--subjects", help="the subject space shared with other tables of the same people")
    pr.add_argument("--public-roster", action="store_true", help="the number of subjects is public already")
    pr.add_argument("--bounds", action="append", metavar="COL=LO,HI", help="repeatable; numbers or dates")
    pr.add_argument("--domain", action="append", metavar="COL=V1,V2,...", help="repeatable")
    pr.add_argument("--sample-order", choices=["per_query", "stored"],
                    help="stored: keep a random order of each subject's rows, so sampling is a filter "
                    "(the same rows for every query until the table changes); default per_query")
    pr.set_defaults(func=cmd_protect)

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
        a.set_defaults(func=cmd_analyst)
    al = ansub.add_parser("list", help="the analysts and their quotas")
    al.add_argument("database")
    _output_options(al)
    al.set_defaults(func=cmd_analyst)

    lg_ = sub.add_parser("login", help=cmd_login.__doc__, description=cmd_login.__doc__)
    lg_.add_argument("database")
    lg_.add_argument("name", help="an analyst's name, or with --owner a name for an owner login")
    lg_.add_argument("--owner", action="store_true", help="an owner login: owner commands over the server")
    lg_.add_argument("--password-stdin", action="store_true", required=True,
                     help="read the password from stdin (required: never on the command line)")
    lg_.set_defaults(func=cmd_login)

    sv = sub.add_parser("serve", help=cmd_serve.__doc__, description=cmd_serve.__doc__)
    sv.add_argument("database")
    sv.add_argument("--host", default="127.0.0.1", help="listen address (default loopback only)")
    sv.add_argument("--port", type=int, default=5433)
    sv.add_argument("--tls-cert", help="PEM certificate: clients must then use TLS")
    sv.add_argument("--tls-key", help="PEM private key of --tls-cert")
    sv.add_argument("--statement-timeout", type=float, default=600.0, metavar="S",
                    help="seconds a statement may run before its debit (a charged one runs to its end; default 600)")
    sv.add_argument("--public-timeout", type=float, default=60.0, metavar="S",
                    help="seconds a public (free) statement may run (default 60)")
    sv.add_argument("--max-result-rows", type=int, default=1_000_000, metavar="N",
                    help="rows one public statement may send (default 1,000,000)")
    sv.add_argument("--max-result-mb", type=float, default=256.0, metavar="MB",
                    help="megabytes one public statement may send (default 256)")
    sv.add_argument("--statements-per-login", type=int, default=4, metavar="N",
                    help="statements one login may run at once over all its sessions; more wait (default 4)")
    sv.set_defaults(func=cmd_serve)
    return p


_CREATING = {"load", "protect", "analyst", "init", "policy"}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    db = getattr(args, "database", None)
    fresh = args.command in _CREATING and db is not None and not os.path.exists(db)
    try:
        return args.func(args)
    except errors.Error as e:
        if fresh:  # this command created the file and failed: leave nothing behind
            from dpgate import database

            database.forget(db)
            for f in (db, db + ".wal"):
                if os.path.exists(f):
                    os.remove(f)
        return _print_error(e)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
