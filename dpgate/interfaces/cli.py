"""The ``dpgate`` command: a thin layer over the library.

Analyst commands: ``shell``, ``query``, ``explain``, ``demo``. Owner commands: ``init``,
``policy apply``, ``ledger``, ``quality``. dpgate errors print as ``error DPxxx: message`` plus a hint,
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


def _print_error(e: errors.Error) -> int:
    print(f"error {e.code}: {e.message}", file=sys.stderr)
    if e.hint:
        print(f"hint: {e.hint}", file=sys.stderr)
    return 1


def _width() -> int:
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
    side = ([result.message] if result.message and not result.columns else []) + release_lines(result)
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
        print_result(cur.result, mode=args.mode, intervals=not args.no_intervals)
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
        print_result(cur.result, mode=args.mode)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Build a fresh demo database (or keep the existing one with --keep) and run a short tour of DP queries on it."""
    from dpgate.interfaces import demo

    path = demo.build(args.db, force=not args.keep)
    if args.no_tour:
        print(path)
        return 0
    demo.tour(path)
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

    with Owner(args.database) as owner:
        for line in owner.apply_policy(args.policy):
            print(line)
    return 0


def cmd_ledger(args: argparse.Namespace) -> int:
    """Print the ledger: every debit, who made it, what it cost, whether it was released (owner)."""
    from dpgate.catalog.owner import Owner
    from dpgate.interfaces.render import format_table, format_value

    with Owner(args.database, create=False) as owner:
        rows = owner.ledger(args.analyst)
    names = ["entry", "at", "analyst", "class", "mechanism", "table", "epsilon", "delta",
             "charged", "excluded", "private", "released", "statement"]  # fmt: skip
    text_rows = [[format_value(v) for v in r] for r in rows]
    print(format_table(names, text_rows, max_width=_width()))
    return 0


def cmd_quality(args: argparse.Namespace) -> int:
    """Compare a release with its source: average TVD of its 1-, 2- and 3-way marginals (owner; reads raw data)."""
    from dpgate.catalog.owner import Owner

    with Owner(args.database, create=False) as owner:
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
    q.add_argument("--mode", choices=["table", "csv", "json"], default="table")
    q.set_defaults(func=cmd_query)

    e = sub.add_parser("explain", help=cmd_explain.__doc__, description=cmd_explain.__doc__)
    e.add_argument("database")
    e.add_argument("sql")
    e.add_argument("--analyst", required=True)
    e.add_argument("--mode", choices=["table", "csv", "json"], default="table")
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
    lg.set_defaults(func=cmd_ledger)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except errors.Error as e:
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
