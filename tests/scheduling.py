"""How pytest-xdist deals the files out (``--dist loadfile``): Spark's files on one worker, longest first.

``loadfile`` keeps a file's tests on one worker (they share module fixtures) and by default hands
out the files with the most tests first. Two things made a run on two cores much longer than its
work divided by two:

* every worker that runs a Spark test starts its own local Spark (a JVM of about 1.5 GB, 40-70 s
  to start on a loaded machine), and the four files that use it landed on both workers;
* the test count says little about a file's time (``test_neighbour_spark.py`` has 9 tests and
  takes the longest), so a long file could start last and run alone at the end.

So the files that use the ``spark`` fixture form one work unit (one JVM per run), and the longest
units start first (longest-processing-time first: the short ones fill in at the end, whichever
worker is free). ``SECONDS`` is a measured guide, not a contract: a file missing from it is
ordered after the listed ones by its test count, as xdist would, and a stale entry only changes
the order. Without xdist, or with another ``--dist``, nothing changes.
"""

from __future__ import annotations

import pytest

#: The files whose tests use the ``spark`` fixture: one work unit, so one local Spark per run.
SPARK_FILES = (
    "tests/backends/test_bounded.py",
    "tests/backends/test_spark_backend.py",
    "tests/backends/test_spark_runtime.py",
    "tests/privacy/test_neighbour_spark.py",
    "tests/privacy/test_neighbour_spark_topk.py",
    "tests/privacy/test_spark_audit.py",
    "tests/privacy/test_spark_graphs.py",
    "tests/privacy/test_spark_joins.py",
    "tests/privacy/test_spark_releases.py",
    "tests/privacy/test_spark_synthetic.py",
    "tests/privacy/test_spark_types.py",
    "tests/test_examples.py",
)
SPARK_UNIT = "spark: " + ", ".join(SPARK_FILES)

#: Seconds each unit of 4 s or more took (summed test times of a clean run on two idle cores, 0.21.0).
SECONDS = {
    SPARK_UNIT: 380,
    "tests/privacy/test_neighbour_corpus.py": 66,
    "tests/server/test_server_load.py": 30,
    "tests/test_corpus.py": 43,
    "tests/queries/test_counting_exact.py": 25,
    "tests/interfaces/test_owner_cli.py": 24,
    "tests/mechanisms/test_ladder_bounds.py": 23,
    "tests/queries/test_subgraph_queries.py": 21,
    "tests/server/test_server_guard.py": 20,
    "tests/mechanisms/test_privbayes.py": 19,
    "tests/privacy/test_timing.py": 19,
    "tests/interfaces/test_demo_tour.py": 18,
    "tests/queries/test_topk_queries.py": 16,
    "tests/mechanisms/test_topk.py": 15,
    "tests/mechanisms/test_diffpart.py": 12,
    "tests/privacy/test_run_epsilon_refusals.py": 12,
    "tests/queries/test_synthetic_queries.py": 12,
    "tests/server/test_server_limits.py": 12,
    "tests/test_layout.py": 12,
    "tests/test_ledger.py": 12,
    "tests/privacy/test_neighbour_charged.py": 11,
    "tests/mechanisms/test_laplace.py": 10,
    "tests/privacy/test_sample_order.py": 10,
    "tests/server/test_server_hostile.py": 10,
    "tests/server/test_server.py": 9,
    "tests/mechanisms/test_ladder.py": 8,
    "tests/mechanisms/test_ladder_intervals.py": 8,
    "tests/mechanisms/test_privtree.py": 8,
    "tests/privacy/test_neighbour_grammar.py": 8,
    "tests/queries/test_synopsis.py": 8,
    "tests/queries/test_variance.py": 8,
    "tests/interfaces/test_cli.py": 7,
    "tests/queries/test_generalized_release.py": 7,
    "tests/frontend/test_fixpoint.py": 6,
    "tests/frontend/test_option_values.py": 6,
    "tests/privacy/test_unit_stats_paths.py": 6,
    "tests/privacy/test_within_bounds.py": 6,
    "tests/queries/test_dates.py": 6,
    "tests/queries/test_engine_hazards.py": 6,
    "tests/queries/test_subject_joins.py": 6,
    "tests/test_disk_full.py": 6,
    "tests/test_epsilon_consumed.py": 6,
    "tests/frontend/test_allowlist.py": 5,
    "tests/frontend/test_classify.py": 5,
    "tests/interfaces/test_dataframes.py": 5,
    "tests/mechanisms/test_mst.py": 5,
    "tests/mechanisms/test_pdp.py": 5,
    "tests/privacy/test_statement_paths.py": 5,
    "tests/queries/test_one_person_groups.py": 5,
    "tests/catalog/test_owner.py": 4,
    "tests/interfaces/test_dbapi.py": 4,
    "tests/interfaces/test_output_width.py": 4,
    "tests/mechanisms/test_quantile.py": 4,
    "tests/privacy/test_neighbour_findings.py": 4,
    "tests/queries/test_synthetic_coding.py": 4,
    "tests/test_tests.py": 4,
}


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return SPARK_UNIT if scope in SPARK_FILES else scope

        def schedule(self) -> None:
            if self.collection is None and self.collection_is_completed:
                self._longest_first = True
            super().schedule()

        def _assign_work_unit(self, node) -> None:
            if getattr(self, "_longest_first", False):  # once, before the first unit is dealt
                self._longest_first = False
                known = sorted((s for s in self.workqueue if s in SECONDS), key=lambda s: -SECONDS[s])
                rest = [s for s in self.workqueue if s not in SECONDS]
                for scope in known + rest:
                    self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    return Scheduling(config, log)
