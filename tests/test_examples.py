"""Every example script runs."""

from __future__ import annotations

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
