"""Exact statistics of a *pairs* relation, for the top-k mechanism (``dpgate.mechanisms.topk``).

A pairs relation holds one row per distinct (subject, item); the engine that holds the rows
aggregates it, and only per-item counts (and per (item, record length) counts) come back. The
mechanism asks for these through ``PairStatistics``; this module implements it for DuckDB
(``SQLPairs``), ``dpgate.backends.spark.topk`` for Spark. No noise is drawn here.

**Guarantee:** none of its own — it releases nothing and draws no noise; the top-k mechanism's
guarantee rests on the sensitivities below, under its neighbouring relation (one subject's rows
added or removed).

**Sensitivity** (the mechanism's proof uses these; an implementation must keep them):

- ``frequencies``: each distinct (unit, item) row counts once, so adding or removing one subject
  moves every item's count by 0 or 1, all in the same direction [sens-freq]; a row with a NULL
  unit, or an item that is not an integer in ``[0, n_items)``, is dropped (never an error: the
  outcome of the statement does not depend on a value).
- ``sampled_frequencies``: each subject keeps at most ``m`` of the requested items, a uniform
  sample ranked by a keyed hash of (unit, item) mixed with a 62-bit salt, so one subject moves
  the vector by at most ``min(#items, m)`` in L1 [sens-counts]. The rank of a subject's item
  depends on that (unit, item) alone.

Both require the relation to be DISTINCT on (unit, item); neither re-checks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

#: (item, record length or None, n): ``n`` records (of that length) hold ``item``.
Frequencies = tuple[np.ndarray, np.ndarray | None, np.ndarray]


class PairStatistics(Protocol):
    """Where the top-k mechanism's exact statistics come from (one engine, one pairs relation)."""

    def frequencies(self, n_items: int, lengths: bool) -> Frequencies:
        """Per item, the records that hold it; with ``lengths``, per (item, record length), where a
        record's length is its number of distinct items in ``[0, n_items)`` [sens-freq]."""

    def sampled_frequencies(self, items: Sequence[int], m: int, salt: int) -> dict[int, int]:
        """Per requested item, the records that hold it, each record keeping at most ``m`` of the
        requested items (ranked by the keyed hash with ``salt``) [sens-counts]. Items no record
        holds may be absent."""


class SQLPairs:
    """``PairStatistics`` of a DuckDB query ``pairs_sql`` (DISTINCT ``__unit``, ``__item``) on ``con``."""

    def __init__(self, con: Any, pairs_sql: str, params: dict | None = None):
        self.con, self.pairs_sql, self.params = con, pairs_sql, params

    def _in_range(self, condition: str) -> str:
        # TRY_CAST keeps every runtime error independent of the rows: an item that is not an
        # integer is dropped like one outside the universe.
        return (
            f"SELECT * FROM (SELECT __unit, TRY_CAST(__item AS BIGINT) AS __item FROM ({self.pairs_sql})) "
            f"WHERE __unit IS NOT NULL AND {condition}"
        )

    def frequencies(self, n_items: int, lengths: bool) -> Frequencies:
        pairs = self._in_range(f"__item >= 0 AND __item < {int(n_items)}")
        if lengths:
            sql = (
                f"WITH __p AS ({pairs}), "
                f"__l AS (SELECT __unit, CAST(count(*) AS INTEGER) AS __len FROM __p GROUP BY __unit) "
                f"SELECT __p.__item AS item, __l.__len AS len, count(*) AS n "
                f"FROM __p JOIN __l ON __p.__unit = __l.__unit GROUP BY ALL"
            )
        else:
            sql = f"SELECT __item AS item, count(*) AS n FROM ({pairs}) GROUP BY ALL"
        res = self.con.execute(sql, self.params or {}).fetchnumpy()
        length = np.asarray(res["len"], dtype=np.int64) if lengths else None
        return np.asarray(res["item"], dtype=np.int64), length, np.asarray(res["n"], dtype=np.int64)

    def sampled_frequencies(self, items: Sequence[int], m: int, salt: int) -> dict[int, int]:
        pairs = self._in_range(f"__item IN ({', '.join(str(int(i)) for i in sorted(items))})")
        if m < len(items):
            # hash(unit, item, salt) would not do: DuckDB combines the salt's hash last with a XOR,
            # which leaves the order of a subject's items far from uniform.
            rank = f"hash(xor(hash(__unit, __item), {int(salt)}::UBIGINT))"
            pairs = (  # [sens-counts]
                f"SELECT __unit, __item FROM ({pairs}) "
                f"QUALIFY row_number() OVER (PARTITION BY __unit ORDER BY {rank}, __item) <= {int(m)}"
            )
        sql = f"SELECT __item AS item, count(*) AS n FROM ({pairs}) GROUP BY ALL"
        res = self.con.execute(sql, self.params or {}).fetchnumpy()
        return dict(zip((int(i) for i in res["item"]), (int(v) for v in res["n"])))
