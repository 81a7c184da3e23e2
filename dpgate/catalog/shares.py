"""Budget shares: how much of each subject's lifetime ε one analyst may use.

Without shares a subject space's budgets are one pool: an analyst with a large quota can spend every
subject's ε, and the next analyst finds nobody left (DP403) with their own quota untouched. With a
share ``s`` (0 < s ≤ 1), analyst A may charge a subject at most ``s`` × that subject's lifetime ε.

**What A has used** of a subject space is the sum of A's ledger entries on its tables (each entry
is A's charge: the largest charge any subject paid for it), an upper bound on what any one subject
paid A. In the debit's transaction a subject's allowance for A's query is then also at most
``s × budget − used``, on the personalization grid; a subject with nothing left for A is left out,
pays nothing and is counted as excluded, as one who spent their budget is. Only public facts go
into it: the budgets, the share, A's own ledger. Shares never raise what a subject can pay, so
they cannot weaken the guarantee; they divide it.

**Settings.** The database's default and each analyst's own share, in ``dpgate.settings``
(``budget_share`` and ``budget_share:NAME``): a fraction, ``equal`` (1 / the number of analysts,
rounded down to 6 decimals, read at each debit), or ``none`` (the whole budget; the default).
Graphs (edge-level privacy, one shared edge budget) take no shares.
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, Decimal, InvalidOperation

import duckdb

from dpgate import errors
from dpgate.catalog.tables import SCHEMA

SETTING = "budget_share"
#: Shares are kept to this many decimals (an equal split of 3 is 0.333333).
PLACES = Decimal("0.000001")


def parse(value: str | float | None) -> str:
    """A share as stored: ``none``, ``equal`` or a fraction in (0, 1] with at most 6 decimals."""
    if value is None:
        return "none"
    text = str(value).strip().lower()
    if text in ("none", "equal"):
        return text
    try:
        share = Decimal(text)
    except InvalidOperation:
        share = Decimal("NaN")
    if not share.is_finite() or not Decimal(0) < share <= 1:
        raise errors.PolicyError(
            f"A budget share must be a fraction in (0, 1], 'equal' or 'none', got {value!r}", code="DP347",
            hint="e.g. 0.5: the analyst may use at most half of each subject's lifetime ε",
        )  # fmt: skip
    kept = share.quantize(PLACES, rounding=ROUND_FLOOR)
    if kept <= 0:  # below a millionth: it would lock the analyst out
        raise errors.PolicyError(
            f"A budget share must be at least {PLACES}, got {value!r}", code="DP347",
            hint="shares are kept to 6 decimals; 'none' gives the whole budget",
        )  # fmt: skip
    return format(kept.normalize(), "f")


def own_share(value: str | float | None) -> str | None:
    """An analyst's own share as given, checked (DP347): None for ``default`` or None (the analyst
    follows the database's share)."""
    if value is None or str(value).strip().lower() == "default":
        return None
    return parse(value)


def set_share(con: duckdb.DuckDBPyConnection, analyst: str | None, share: str | float | None) -> None:
    """Set the database's default share (``analyst`` None) or one analyst's (None there: follow the default)."""
    key = SETTING if analyst is None else f"{SETTING}:{analyst}"
    if analyst is not None and share is None:
        con.execute(f"DELETE FROM {SCHEMA}.settings WHERE key = ?", [key])
        return
    con.execute(f"INSERT OR REPLACE INTO {SCHEMA}.settings (key, value) VALUES (?, ?)", [key, parse(share)])


def stated(con: duckdb.DuckDBPyConnection, analyst: str) -> tuple[str, bool]:
    """(the share that holds for ``analyst`` as stored, whether it is the analyst's own)."""
    own, default = con.execute(
        f"SELECT (SELECT value FROM {SCHEMA}.settings WHERE key = ?), "
        f"(SELECT value FROM {SCHEMA}.settings WHERE key = ?)", [f"{SETTING}:{analyst}", SETTING],
    ).fetchone()  # fmt: skip
    return (own, True) if own is not None else (default or "none", False)


def describe(con: duckdb.DuckDBPyConnection, analyst: str) -> str:
    """The share that holds for ``analyst`` as the owner reads it: ``0.5``, ``equal`` or ``none``, with
    `` (default)`` when it is the database's."""
    value, own = stated(con, analyst)
    return value if own else f"{value} (default)"


def share_of(con: duckdb.DuckDBPyConnection, analyst: str, settings: tuple | None = None) -> Decimal | None:
    """The share of each subject's lifetime ε ``analyst`` may use now, or None (the whole budget);
    ``settings``: (the analyst's own, the database's) as the caller read them."""
    value = stated(con, analyst)[0] if settings is None else (settings[0] or settings[1] or "none")
    if value == "none":
        return None
    if value == "equal":
        (n,) = con.execute(f"SELECT count(*) FROM {SCHEMA}.analysts").fetchone()
        return (Decimal(1) / max(int(n), 1)).quantize(PLACES, rounding=ROUND_FLOOR)
    return Decimal(value)


def used(con: duckdb.DuckDBPyConnection, analyst: str, roster: str) -> Decimal:
    """What ``analyst`` has charged on the tables of subject space ``roster`` (their ledger entries)."""
    (total,) = con.execute(
        f"SELECT coalesce(sum(epsilon), 0) FROM {SCHEMA}.ledger WHERE analyst = ? AND roster = ?", [analyst, roster]
    ).fetchone()  # the space each entry charged, as it was then: unprotecting or moving a table changes nothing
    return Decimal(total)


def ensure(con: duckdb.DuckDBPyConnection) -> None:
    """A ledger made by dpgate before 0.24.0 gets its ``roster`` column, filled from the tables' subject
    spaces as they are now (the best record there is of what older entries charged)."""
    (present,) = con.execute(
        f"SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database() AND schema_name = '{SCHEMA}' "
        "AND table_name = 'ledger' AND column_name = 'roster'"
    ).fetchone()  # fmt: skip
    if present:
        return
    con.execute(f"ALTER TABLE {SCHEMA}.ledger ADD COLUMN IF NOT EXISTS roster VARCHAR")
    con.execute(f"UPDATE {SCHEMA}.ledger SET roster = p.roster_table FROM {SCHEMA}.protected_tables p "
                f"WHERE p.table_name = {SCHEMA}.ledger.table_name AND {SCHEMA}.ledger.roster IS NULL")  # fmt: skip


def limit(con: duckdb.DuckDBPyConnection, analyst: str, table, stated: tuple | None = None) -> tuple[Decimal, Decimal] | None:
    """(share, used) that bound ``analyst``'s charges on ``table``'s subjects, or None (no share);
    ``stated``: the settings as the caller read them (the debit reads them with the quota)."""
    if table is None or table.kind == "graph":
        return None
    share = share_of(con, analyst, stated)
    if share is None:
        return None
    return share, used(con, analyst, table.roster)


def remaining_sql(limited: tuple[Decimal, Decimal] | None) -> str:
    """A subject's ε left, as the allowance reads it: with a share, also at most share × budget − used.
    The two numbers are written into the SQL as exact decimals (they are this module's own)."""
    budget = "CAST(epsilon_budget AS DECIMAL(38, 18))"
    left = f"({budget} - epsilon_spent)"
    if limited is None:
        return left
    share, spent = limited
    # The budget to 12 decimals times a share of 6 is exact in DECIMAL(38, 18), for budgets below 1e20
    # (with 18 decimals the product's scale, 24, left 14 digits for the budget and overflowed at 1e14).
    # Rounding the budget to 12 decimals moves the cap by at most 5e-13: far below the grid the
    # allowance is floored to, and never past the subject's own budget, which the other term keeps.
    capped = (f"CAST(CAST(epsilon_budget AS DECIMAL(38, 12)) * CAST('{share:f}' AS DECIMAL(7, 6)) AS DECIMAL(38, 18)) "
              f"- CAST('{spent:f}' AS DECIMAL(38, 18))")  # fmt: skip
    return f"least({left}, {capped})"
