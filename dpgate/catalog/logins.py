"""Who may log in to ``dpgate serve``: one SCRAM-SHA-256 verifier per login, never a password.

A login is either an analyst's (the name of an analyst in ``dpgate.analysts``: the session
runs as that analyst, whatever the client claims) or an owner's (owner operations over the
server). The table lives in dpgate's schema, which analysts' SQL can never read.
"""

from __future__ import annotations

import secrets

import duckdb

from dpgate import errors, scram
from dpgate.catalog import tables as catalog

ROLES = ("analyst", "owner")


def ensure(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {catalog.SCHEMA}.logins ("
        "name VARCHAR PRIMARY KEY, verifier VARCHAR NOT NULL, role VARCHAR NOT NULL, "
        "changed_at TIMESTAMP NOT NULL DEFAULT current_timestamp)"
    )


def lookup(con: duckdb.DuckDBPyConnection, name: str) -> tuple[str, str] | None:
    """(verifier, role) of ``name``, or None."""
    ensure(con)
    row = con.execute(f"SELECT verifier, role FROM {catalog.SCHEMA}.logins WHERE name = ?", [name]).fetchone()
    return (row[0], row[1]) if row else None


def set_login(con: duckdb.DuckDBPyConnection, name: str, *, role: str, password: str | None = None,
              verifier: str | None = None) -> None:  # fmt: skip
    """Store the verifier of ``name`` (made from ``password``, or given as a SCRAM verifier)."""
    if role not in ROLES:
        raise errors.PolicyError(f"A login is an analyst's or an owner's, not {role!r}", code="DP325")
    if (password is None) == (verifier is None):
        raise errors.PolicyError("Give a password or a SCRAM verifier", code="DP325")
    if password is not None:
        if len(password) < 8:
            raise errors.PolicyError("A login password needs at least 8 characters", code="DP325",
                                     hint="choose a longer password (or send a SCRAM verifier: psql's \\password)")  # fmt: skip
        verifier = scram.make_verifier(password)
    try:
        iterations = scram.parse_verifier(verifier)[0]
    except ValueError:
        raise errors.PolicyError(
            "Not a SCRAM-SHA-256 verifier", code="DP325",
            hint="give SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey> (as PostgreSQL stores them)",
        ) from None  # fmt: skip
    if iterations > scram.MAX_ITERATIONS:  # dpgate web runs them on the server at each sign-in
        raise errors.PolicyError(
            f"This verifier asks for {iterations:,} PBKDF2 iterations; dpgate stores at most "
            f"{scram.MAX_ITERATIONS:,}", code="DP325",
            hint=f"make it with fewer (PostgreSQL's default is {scram.ITERATIONS}; psql's \\password uses it)",
        )  # fmt: skip
    ensure(con)
    is_analyst = con.execute(f"SELECT 1 FROM {catalog.SCHEMA}.analysts WHERE name = ?", [name]).fetchone()
    if role == "analyst" and not is_analyst:
        raise errors.PolicyError(f"No analyst named {name!r}", code="DP326",
                                 hint="add the analyst first (dpgate analyst add DB NAME --epsilon ...)")  # fmt: skip
    if role == "owner" and is_analyst:
        raise errors.PolicyError(f"{name!r} is an analyst; an owner login needs a name of its own", code="DP326")
    if role == "analyst" and owner_login(con, name):
        # INSERT OR REPLACE would turn the owner's login into an analyst's
        raise errors.PolicyError(f"{name!r} is an owner login; an analyst needs a name of its own", code="DP326")
    con.execute(
        f"INSERT OR REPLACE INTO {catalog.SCHEMA}.logins (name, verifier, role, changed_at) "
        "VALUES (?, ?, ?, current_timestamp)",
        [name, verifier, role],
    )


def names(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    ensure(con)
    return con.execute(f"SELECT name, role FROM {catalog.SCHEMA}.logins ORDER BY name").fetchall()


def server_secret(con: duckdb.DuckDBPyConnection) -> bytes:
    """The key of the fake verifiers for names with no login, made once and kept in dpgate's
    settings, so an unknown name's fake salt stays the same across restarts, like a real one."""
    row = con.execute(f"SELECT value FROM {catalog.SCHEMA}.settings WHERE key = 'server_secret'").fetchone()
    if row is None:
        con.execute(f"INSERT INTO {catalog.SCHEMA}.settings VALUES ('server_secret', ?) ON CONFLICT DO NOTHING",
                    [secrets.token_hex(32)])  # fmt: skip
        row = con.execute(f"SELECT value FROM {catalog.SCHEMA}.settings WHERE key = 'server_secret'").fetchone()
    return bytes.fromhex(row[0])


def owner_login(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether ``name`` is an owner login of ``dpgate serve`` (no logins table: no login)."""
    try:
        row = con.execute(f"SELECT 1 FROM {catalog.SCHEMA}.logins WHERE name = ? AND role = 'owner'", [name]).fetchone()
    except duckdb.CatalogException:  # a binder error: it leaves an open transaction usable
        return False
    return row is not None
