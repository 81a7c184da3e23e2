"""%load_ext dpgate: the %dpsql magics, with a stand-in for IPython's shell object."""

from __future__ import annotations

import pytest

import dpgate
from dpgate.interfaces import notebook


class FakeIPython:
    def __init__(self):
        self.magics = {}

    def register_magic_function(self, fn, kind, name):
        self.magics[(kind, name)] = fn


def test_the_magics_connect_and_run_a_cell(demo_db):
    ip = FakeIPython()
    dpgate.load_ipython_extension(ip)
    assert set(ip.magics) == {("line", "dpsql"), ("cell", "dpsql")}
    ip.magics[("line", "dpsql")](f"connect {demo_db} demo")
    try:
        cur = ip.magics[("cell", "dpsql")]("", "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) AS n FROM adult")
        html = cur._repr_html_()
        assert "<table>" in html and "cost: ε 0.1" in html
        assert ip.magics[("line", "dpsql")]("SHOW BUDGET").fetchall()
    finally:
        notebook._STATE["connection"].close()
        notebook._STATE["connection"] = None


def test_a_cell_without_a_connection_says_what_to_do():
    notebook._STATE["connection"] = None
    with pytest.raises(dpgate.Error) as e:
        notebook.dpsql("", "SELECT 1")
    assert e.value.code == "DP106" and "%dpsql connect" in e.value.hint
