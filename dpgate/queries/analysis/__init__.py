"""The SQL analysis shared by the classes that aggregate rows of one protected table.

Used by the counting class (COUNT / SUM / AVG with WHERE, GROUP BY and post-processing)
and the top-k class; it imports no query class.

Input: a SELECT that ``classify`` found to read exactly one protected table. Output: a
``CountPlan`` fixing, from the statement and public facts only,

- the rows: the protected table, its joins with public lookup tables, the WHERE clause;
- the GROUP BY keys and their public domains (declared values, integer bounds, a public
  lookup column, or the image of an expression over those), or DP key selection when a
  key has no public domain (costs δ);
- each aggregate's bounded input, sensitivity and share of ε (equal shares);
- the post-processing (the analyst's projections, HAVING, ORDER BY, LIMIT) to run on the
  noisy values;
- what the personalization rule charges each subject.

Everything refused here is refused before any row is read, with errors that depend only
on the statement and the catalog.

The package: ``core`` (``Analysis``, ``analyse``, ``Syntax``, ``Prepared``) assembles ``scope``
(sources, joins, shape), ``keys`` (GROUP BY keys and domains, DP key selection), ``aggregates``
(inputs, bounds, sensitivities), ``post`` (the base relation and post-processing) and
``per_subject`` (the per-subject subquery); ``common`` holds the SQL helpers they share.
"""

from __future__ import annotations

from dpgate.mechanisms.keyselection import threshold as key_selection_threshold
from dpgate.queries.analysis.aggregates import SUPPORTED_AGGREGATES, _with_epsilon, quantile_level
from dpgate.queries.analysis.common import PER_SUBJECT, display_sql, query_hash
from dpgate.queries.analysis.core import MAX_CELLS, Analysis, Prepared, PublicFacts, Syntax, analyse
from dpgate.queries.analysis.post import output_column

__all__ = [
    "MAX_CELLS", "PER_SUBJECT", "SUPPORTED_AGGREGATES", "Analysis", "Prepared", "PublicFacts", "Syntax",
    "_with_epsilon", "analyse", "display_sql", "key_selection_threshold", "output_column", "quantile_level",
    "query_hash",
]  # fmt: skip
