"""Benchmark: what the shapes the function-list audit found cost raw, and whether the gateway refuses them.

Not part of the test suite (costs are reported, not asserted). Each statement runs raw in DuckDB in a
child process under an address-space cap and a timeout (a bomb kills only that child), with
``memory_limit`` set, and through the gateway's checks (``Gateway.cost``: nothing runs). Run:

    python tests/benchmarks/bench_public_bounds.py [--python /path/to/python] [--limit 1GB] [--timeout 60]

``--python`` runs the raw side on another interpreter (another DuckDB: ``/work/venv15/bin/python`` style
environments with DuckDB 1.5). Prints a table: the statement, the gateway's answer, the raw time, the
peak resident memory of the child and its outcome (a result, an error, killed by the timeout or a
crash). Expect about ten minutes: several shapes run until the timeout.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import dpgate
from dpgate.interfaces import demo

N = "k" * 1000
#: (what, statement): the gateway's dialect; ``RAW`` below rewrites lambdas for DuckDB 2's binder.
SHAPES = [
    ("gathered text used 65 times", "SELECT length(" + " || ".join(["s"] * 65)
     + ") FROM (SELECT string_agg(i::VARCHAR, '') s FROM range(10000000) t(i))"),
    ("gathered list used 65 times", "SELECT len(list_concat(" + ", ".join(["l"] * 65)
     + ")) FROM (SELECT list(i) l FROM range(10000000) t(i))"),
    ("a 1,000-character name per gathered element", f"SELECT length(list({{'{N}': i}})::VARCHAR) FROM range(3000000) t(i)"),
    ("list_zip of 61 lists, 20,000 rows", "SELECT sum(len(list_zip(range(2000), " + ", ".join(["[i]"] * 60)
     + "))) FROM range(20000) t(i)"),
    ("concat_ws over a list", "SELECT length(concat_ws(repeat('x', 2000), range(2000)))"),
    ("remap_struct, one field to 60", "SELECT length(concat(remap_struct({'a': repeat('x', 3000)}, NULL::STRUCT("
     + ", ".join(f"f{i} VARCHAR" for i in range(60)) + "), {" + ", ".join(f"'f{i}': 'a'" for i in range(60))
     + "}, NULL), ''))"),
    ("an ENUM label per element", "SELECT length(array_to_string(list_transform(range(120), x -> enum_first(NULL::ENUM('"
     + "a" * 4000 + "'))), ''))"),
    ("a struct field sized as a number", "SELECT length(repeat(({'a': repeat('x', 4000)}).a, 60))"),
    ("text to BIGNUM, 200,000 digits", "SELECT length(string_agg('9', '')::BIGNUM::VARCHAR) FROM range(200000)"),
    ("approx_top_k, 100,000 groups", "SELECT sum(len(k)) FROM (SELECT i % 100000 g, approx_top_k(i, 999999) k "
     "FROM range(20000000) t(i) GROUP BY g)"),
    ("reservoir_quantile, default sample", "SELECT sum(r) FROM (SELECT i // 8192 g, reservoir_quantile(i, 0.5) r "
     "FROM range(100000000) t(i) GROUP BY g)"),
    ("mode, 100 million rows", "SELECT mode(i) FROM range(100000000) t(i)"),
    ("list_distinct of 10 million gathered", "SELECT len(list_distinct(l)) FROM (SELECT list(i) l FROM range(10000000) t(i))"),
    ("list_intersect of 3 million gathered", "SELECT len(list_intersect(l, l)) FROM (SELECT list(i) l FROM range(3000000) t(i))"),
    ("map of 10 million gathered", "SELECT cardinality(map(l, l)) FROM (SELECT list(i) l FROM range(10000000) t(i))"),
    ("list_aggregate mode, 10 million", "SELECT list_aggregate(l, 'mode') FROM (SELECT list(i) l FROM range(10000000) t(i))"),
    ("list_reduce of a gathered text", "SELECT length(list_reduce(list(i::VARCHAR), (a, b) -> a || b)) FROM range(400000) t(i)"),
    ("a 12-character regex, 500,000 characters", "SELECT regexp_matches(s, '(a|b){1000}c') FROM "
     "(SELECT string_agg(CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, '') s FROM range(500000) t(i))"),
    ("227 instructions over 20 million gathered", "SELECT regexp_matches(s, 'a[ab]{14}c') FROM (SELECT "
     "string_agg(CASE WHEN hash(i) % 2 = 0 THEN 'a' ELSE 'b' END, '') s FROM range(20000000) t(i))"),
    ("levenshtein per element of 200", "SELECT len(list_filter(range(200), x -> levenshtein(repeat('a', 3800) || "
     "x::VARCHAR, repeat('b', 3800)) > 0))"),
    ("json_merge_patch, 60,000 levels", "SELECT length(json_merge_patch('{}', (SELECT string_agg('{\"a\":', '') "
     "|| '1' || string_agg('}', '') FROM range(60000))))"),
    # accepted, for scale: gathering, a regex within the gathered bound, and growth within the 64x allowance
    ("(accepted) gathered text used 50 times", "SELECT length(" + " || ".join(["s"] * 50)
     + ") FROM (SELECT string_agg(i::VARCHAR, '') s FROM range(10000000) t(i))"),
    ("(accepted) gathering 20 million characters", "SELECT length(string_agg(CASE WHEN hash(i) % 2 = 0 THEN 'a' "
     "ELSE 'b' END, '')) FROM range(20000000) t(i)"),
    ("(accepted) a[ab]{8}c over them", "SELECT regexp_matches(s, 'a[ab]{8}c') FROM (SELECT "
     "string_agg(CASE WHEN hash(i) % 2 = 0 THEN 'a' ELSE 'b' END, '') s FROM range(20000000) t(i))"),
]

CHILD = r"""
import re, resource, sys, time, duckdb
sql, limit = sys.argv[1], sys.argv[2]
if int(duckdb.__version__.split(".")[0]) >= 2:
    sql = re.sub(r"(\(|, )(\w+) -> ", r"\1lambda \2: ", sql)
    sql = re.sub(r"\((\w+), (\w+)\) -> ", r"lambda \1, \2: ", sql)
con = duckdb.connect()
con.execute(f"SET memory_limit = '{limit}'")
con.execute("SET enable_progress_bar = false")
t = time.perf_counter()
try:
    con.execute(sql).fetchall()
    out = "ran"
except Exception as e:
    out = type(e).__name__ + ": " + str(e).split("\n")[0][:60]
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{time.perf_counter() - t:.1f}|{rss:.0f}|{out}")
"""


def raw(python: str, sql: str, limit: str, timeout: int) -> tuple[str, str, str]:
    cmd = ["prlimit", "--as=6000000000", "timeout", "-s", "KILL", str(timeout), python, "-c", CHILD, sql, limit]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode == 137:
        return f">{timeout}", "-", "killed by the timeout (one call: no interrupt reached it)"
    if proc.returncode != 0:
        return "-", "-", f"crashed (exit {proc.returncode})"
    seconds, rss, out = proc.stdout.strip().splitlines()[-1].split("|", 2)
    return seconds, rss, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--limit", default="1GB")
    ap.add_argument("--timeout", type=int, default=60)
    args = ap.parse_args()
    version = subprocess.run([args.python, "-c", "import duckdb; print(duckdb.__version__)"], capture_output=True,
                             text=True).stdout.strip()  # fmt: skip
    db = demo.build(Path(tempfile.mkdtemp()) / "demo.duckdb")
    gw = dpgate.connect(str(db), analyst="demo")._gateway
    print(f"raw: DuckDB {version}, memory_limit {args.limit}, 6 GB address space, {args.timeout} s\n")
    print("| shape | gateway | raw s | peak MB | raw outcome |\n|---|---|---|---|---|")
    for what, sql in SHAPES:
        try:
            gw.cost(sql)
            verdict = "accepted"
        except dpgate.Error as e:
            verdict = f"refused {e.code}"
        seconds, rss, out = raw(args.python, sql, args.limit, args.timeout)
        print(f"| {what} | {verdict} | {seconds} | {rss} | {out} |", flush=True)


if __name__ == "__main__":
    main()
