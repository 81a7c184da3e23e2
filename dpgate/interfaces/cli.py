"""The ``dpgate`` command: a thin layer over the library.

Analyst commands: ``shell``, ``query``, ``explain``, ``demo``. Owner commands: ``init``,
``load``, ``protect``, ``analyst add|set|list``, ``budget``, ``policy apply``, ``ledger``,
``quality``, ``login``, built and run in ``owner_commands`` (the server runs them too); this module
prints their replies. ``serve`` runs the PostgreSQL-protocol server, ``web`` the browser pages. Commands that only read never
add dpgate's schema to a file; a command that created the database file and then failed removes it.
argparse (the standard library) is enough for these commands and adds no dependency. dpgate errors
print as ``error DPxxx: message`` plus a hint, with exit status 1; nothing is charged for a refused
statement.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import warnings
from collections.abc import Sequence

from dpgate import __version__, errors
from dpgate.interfaces import owner_commands


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
                 expanded: str = "auto", out=None, err=None) -> None:  # fmt: skip
    """Print a result in one of the three modes, never dropping what a DP answer says about itself.

    ``table``: the table, its cost, population and notes on ``out``, fitted to ``max_width``
    (``expanded``: auto, on or off, as psql's ``\\x``). ``json``: one envelope on ``out``. ``csv``:
    the rows on ``out``; the message, cost, population and notes on ``err``, one line each after
    ``# `` (so ``> file.csv`` keeps them on the screen).
    """
    from dpgate.interfaces.render import format_result, release_lines

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    if mode != "csv":
        print(format_result(result, intervals=intervals, mode=mode, max_width=max_width, expanded=expanded), file=out)
        return
    text = format_result(result, intervals=intervals, mode="csv")
    if text:
        print(text, file=out)
    out.flush()
    free_notes = result.message and (not result.columns or result.release is None)  # e.g. from a synopsis
    side = (result.message.splitlines() if free_notes else []) + release_lines(result, intervals)
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
        print_result(cur.result, mode=args.mode, intervals=not args.no_intervals, max_width=_width(args.wide),
                     expanded=args.expanded)  # fmt: skip
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
        print_result(cur.result, mode=args.mode, max_width=_width(args.wide), expanded=args.expanded)
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


def _owner_table(names: list[str], rows: list[tuple], mode: str, wide: bool = False, expanded: str = "auto") -> None:
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
        print(format_table(names, [[format_value(v) for v in r] for r in rows], numeric, max_width=_width(wide),
                           expanded=expanded))  # fmt: skip


def print_reply(reply: owner_commands.Reply, *, mode: str = "table", wide: bool = False, expanded: str = "auto") -> None:
    """Print an owner command's reply: its listings (a blank line between tables), then its lines
    (wrapped to the terminal, as tables are)."""
    from dpgate.interfaces.render import wrap_lines

    for i, listing in enumerate(reply.listings):
        if i and mode == "table":
            print()
        _owner_table(listing.names, listing.rows, mode, wide, expanded)
    width = _width(wide) if mode == "table" else None
    for line in reply.lines:
        print(wrap_lines(line, width, "  "))


def _stdin_line() -> str:
    """The first line of stdin: a password comes there, never on the command line, where ps shows it."""
    return sys.stdin.readline().rstrip("\r\n")


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


def cmd_web(args: argparse.Namespace) -> int:
    """Serve the database to browsers: analysts see answers with error bars, owners where the budget went."""
    limits = {"statement_timeout": args.statement_timeout, "public_timeout": args.public_timeout,
              "max_result_rows": args.max_result_rows, "max_result_bytes": int(args.max_result_mb * 2**20),
              "statements_per_login": args.statements_per_login, "idle": args.idle_minutes * 60}  # fmt: skip
    for flag in ("statement_timeout", "public_timeout", "max_result_rows", "max_result_mb", "statements_per_login",
                 "idle_minutes"):  # fmt: skip
        if not getattr(args, flag) > 0:
            raise errors.ProgrammingError(f"--{flag.replace('_', '-')} must be positive", code="DP322",
                                          hint="dpgate web --help lists the limits and their defaults")  # fmt: skip
    from dpgate.web import serve

    def ready(running):
        names = running.web.logins()
        print(f"dpgate web: {running.web.path} on {running.url}; {len(names)} login(s). Ctrl-C stops.", flush=True)
        if not names:
            print(f"note: nobody can sign in yet: echo \"$PASSWORD\" | dpgate login {args.database} NAME --password-stdin",
                  flush=True)  # fmt: skip

    serve.run(args.database, host=args.host, port=args.port, tls_cert=args.tls_cert, tls_key=args.tls_key,
              ready=ready, **limits)  # fmt: skip
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
    owner_commands.output_options(q)
    q.set_defaults(func=cmd_query)

    e = sub.add_parser("explain", help=cmd_explain.__doc__, description=cmd_explain.__doc__)
    e.add_argument("database")
    e.add_argument("sql")
    e.add_argument("--analyst", required=True)
    owner_commands.output_options(e)
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

    owner_commands.add_parsers(sub)

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

    w = sub.add_parser("web", help=cmd_web.__doc__, description=cmd_web.__doc__)
    w.add_argument("database")
    w.add_argument("--host", default="127.0.0.1", help="listen address (default loopback only; another needs TLS)")
    w.add_argument("--port", type=int, default=8765)
    w.add_argument("--tls-cert", help="PEM certificate: the page is then served over HTTPS")
    w.add_argument("--tls-key", help="PEM private key of --tls-cert")
    w.add_argument("--statement-timeout", type=float, default=600.0, metavar="S",
                   help="seconds a statement may run before its debit (a charged one runs to its end; default 600)")
    w.add_argument("--public-timeout", type=float, default=60.0, metavar="S",
                   help="seconds a public (free) statement may run (default 60)")
    w.add_argument("--max-result-rows", type=int, default=10_000, metavar="N",
                   help="rows one public statement may send to the page (default 10,000)")
    w.add_argument("--max-result-mb", type=float, default=16.0, metavar="MB",
                   help="megabytes one public statement may send to the page (default 16)")
    w.add_argument("--statements-per-login", type=int, default=4, metavar="N",
                   help="statements one login may run at once over all its sessions; more wait (default 4)")
    w.add_argument("--idle-minutes", type=float, default=30.0, metavar="M",
                   help="a signed-in session ends after this many minutes without a request (default 30)")
    w.set_defaults(func=cmd_web)
    return p


_CREATING = {"load", "protect", "analyst", "init", "policy"}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    db = getattr(args, "database", None)
    fresh = args.command in _CREATING and db is not None and not os.path.exists(db)
    try:
        if hasattr(args, "owner_command"):
            reply = owner_commands.run(args, read_password=_stdin_line)
            print_reply(reply, mode=getattr(args, "mode", "table"), wide=getattr(args, "wide", False),
                        expanded=getattr(args, "expanded", "auto"))  # fmt: skip
            return 0
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
