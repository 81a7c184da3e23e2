"""Every example script runs."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_dbapi_quickstart(demo_db):
    proc = subprocess.run([sys.executable, str(EXAMPLES / "dbapi_quickstart.py"), str(demo_db)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "95% interval" in proc.stdout and "refused [DP211]" in proc.stdout


def test_example_data_carries_its_licence():
    text = (EXAMPLES / "data" / "README.md").read_text()
    assert "adult.parquet" in text and "CC BY 4.0" in text


def _run(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_topk_baskets_prints_the_f1_table():
    out = _run("topk_baskets.py", "--runs", "1", "--seed", "1")
    assert "F1 against the true top-k" in out and "tps_pfm" in out and "oneshot" in out
    rows = [line for line in out.splitlines() if re.match(r"^\s*(5|10|20)\s+[0-9.]+\s+[0-9.]+", line)]
    assert len(rows) == 12, "one row per (k, ε)"


def test_ladder_utility_prints_the_error_table():
    out = _run("ladder_utility.py", "--runs", "2")
    for query in ("triangle", "2-star", "3-star"):
        assert sum(line.startswith(query) for line in out.splitlines()) == 3, "one row per ε"


def test_beyond_counts_runs_every_new_shape():
    out = _run("beyond_counts.py")
    for title in ("spread of purchase amounts", "purchases per month", "a join of two protected tables", "a lookup join",
                  "per-subject values"):  # fmt: skip
        assert f"-- {title}" in out, title
    assert out.count("month=") == 12 and "median=" in out and "sd=" in out


def test_the_licence_file_matches_the_package_metadata():
    root = EXAMPLES.parent
    assert "Apache License" in (root / "LICENSE").read_text() and "Version 2.0" in (root / "LICENSE").read_text()
    assert 'license = { text = "Apache-2.0" }' in (root / "pyproject.toml").read_text()


def test_docs_and_docstrings_send_nobody_outside_the_repository():
    root = EXAMPLES.parent
    pages = [root / "README.md", *root.joinpath("docs").rglob("*.md"), root / "mkdocs.yml"]
    assert len(pages) >= 20
    texts = [*pages, *root.joinpath("dpgate").rglob("*.py"), *EXAMPLES.glob("*.py")]
    for path in texts:
        text = path.read_text()
        for bad in ("DESIGN.md", "shared/research", "seed 00", "seed-00"):
            assert bad not in text, f"{path.name} cites {bad}"


def test_setvalued_release_prints_the_error_table():
    out = _run("setvalued_release.py", "--records", "20000", "--queries", "300", "--runs", "1", "--seed", "1")
    assert "supermarket baskets: 4,627 records, 122 items, median 18" in out
    assert "sparse baskets: 4,043 records, 104 items, median 8" in out and "MSNBC-shaped: 20,000 records, 17 items" in out
    rows = [line.split() for line in out.splitlines() if re.match(r"^\s*(0\.5|1\.0|2\.0)\s+(partition|marginals)\s", line)]
    rows = [r for r in rows if len(r) == 8]  # ε, route, method, four errors, seconds (not the paper's metrics)
    assert len(rows) == 3 * 3 * 5, "one row per (dataset, ε, method)"
    by = {(r[0], r[1], r[2], i // 15): r for i, r in enumerate(rows)}
    for data in (0, 1):  # the basket sets: DiffPart releases nothing, the route takes the marginals path
        assert by[("1.0", "marginals", "partition", data)][3] == "1.000"
        assert float(by[("1.0", "marginals", "marginals", data)][3]) < 0.15
    assert "DiffPart paper's metrics" in out and len(re.findall(r"^\s*[0-9.]+\s+(partition|marginals)\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+$", out, re.M)) == 6


def test_privtree_cities_prints_the_error_table():
    out = _run("privtree_cities.py", "--queries", "60", "--runs", "1", "--seed", "1")
    rows = [line.split() for line in out.splitlines() if re.match(r"^(places|sample)\s+[0-9.]+\s+(1|10|50)%\s", line)]
    assert len(rows) == 18, "one row per (data, ε, size)"
    assert all(len(r) == 3 + 2 * 4 + 1 for r in rows), "old, new, ug, ag with their bootstrap ranges, and the ratio"
    assert re.search(r"new beats both grids in \d+ of 18", out)


def test_privtree_sequences_prints_both_tables():
    out = _run("privtree_sequences.py", "--sequences", "3000", "--runs", "1", "--seed", "1")
    assert "careers (mvad): 712 sequences, 6 symbols" in out and "msnbc-shaped: 3,000 sequences, 17 symbols" in out
    rows = [line for line in out.splitlines() if re.match(r"^\s*(0\.1|0\.2|0\.4|0\.8|1\.6)\s", line)]
    assert len(rows) == 10 and out.count("truncate: top-10") == 2


def test_supermodular_adult_prints_the_error_table():
    out = _run("supermodular_adult.py", "--runs", "1", "--queries", "100", "--epsilons", "1")
    rows = [line.split() for line in out.splitlines() if re.match(r"^\s*1\s+\w+\s+[0-9.]+\s+[0-9.]+", line)]
    assert [r[1] for r in rows] == ["supermodular", "privbayes", "mst", "independent"]
    assert all(float(r[2]) >= 0 and float(r[3]) >= 0 for r in rows)
    assert "claimed by the paper, not proved" in out


def test_spark_adult_answers_on_both_engines(spark, capsys):
    # In this process, on the suite's Spark session (a subprocess would start a second JVM, ~15 s);
    # ``main`` only adds the session's start and stop around ``run``.
    spec = importlib.util.spec_from_file_location("spark_adult_example", EXAMPLES / "spark_adult.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.run(spark)
    out = capsys.readouterr().out
    assert out.count("Spark ") >= 11 and out.count("ms on Spark") == 3  # every cell, every query, both engines
    assert "on Spark: " in out  # a top-k answered on the Spark table
    assert out.count("[DP261]") == 2  # lower() and % refused on the Spark table (the engines compute them apart)
    assert re.search(r"on Spark: [\d,]+ rows in", out) and out.count("    income ") == 2  # an MST release
    # three queries at ε 0.1 on each; the top-k (ε 0.1) and the release (ε 0.5) on Spark only
    assert "DuckDB: ε left 4.7 of 5" in out and "Spark: ε left 4.1 of 5" in out


def test_spark_graph_counts_equal_on_both_engines(spark, capsys):
    # In this process, on the suite's Spark session; a test seed on both databases: the same graph,
    # the same noise, so each count must be printed twice alike
    spec = importlib.util.spec_from_file_location("spark_graph_example", EXAMPLES / "spark_graph.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.run(spark, seed=7)
    out = capsys.readouterr().out
    lines = [line.split("(")[0].split()[1:] for line in out.splitlines() if line.startswith(("  DuckDB", "  Spark"))]
    assert len(lines) == 4 and lines[0] == lines[1] and lines[2] == lines[3], out
    assert int(lines[0][0].replace(",", "")) > 1_000_000  # WormNet has about two million triangles


def test_dashboard_refresh_spends_once(demo_db):
    from dpgate.catalog.owner import Owner

    with Owner(demo_db, create=False) as o:
        o.set_answer_memory("own")  # the shipped demo's default (the test fixture turns it off)
    out = _run("dashboard_refresh.py", str(demo_db), "--refreshes", "20")
    assert "ε spent 0.5 (the charts' ε once: 0.5)" in out
    assert out.count("1 distinct answer(s)") == 2 and "charged ε 0.2" in out
