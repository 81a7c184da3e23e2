"""dpgate's exceptions: the PEP 249 hierarchy, each with a stable code and a hint.

Every error says what was refused and why, the numbers involved, and what would be
accepted. An error raised before data is read never depends on private data. Refused
queries charge nothing.

Codes (stable; tests and clients may match on them):

- ``DP1xx`` interface: closed objects, bad connect arguments.
- ``DP2xx`` the query: syntax, unsupported shapes, forbidden reads.
- ``DP3xx`` policy: unknown analyst, per-query caps, missing declarations.
- ``DP4xx`` budget: analyst quota, subject budgets.
- ``DP5xx`` internal: a bug in dpgate.
- ``DP6xx`` data: bad parameter values.
"""

from __future__ import annotations

from typing import Any


class Warning(Exception):  # noqa: A001 - PEP 249 name
    """PEP 249 ``Warning``."""


class RosterWarning(UserWarning):
    """A protected table's subject count becomes public because its roster comes from its rows."""


class PopulationWarning(UserWarning):
    """An answer is about fewer subjects than the roster: some had no budget left or were left out.

    Its counts and sums cover only the answer's population (``cursor.release.population``), so
    they can be lower than over the whole table; ``cursor.messages`` says who is missing.
    """


class Error(Exception):
    """Root of dpgate's errors (PEP 249 ``Error``).

    Attributes:
        code: stable machine-readable code such as ``"DP211"``.
        hint: what would be accepted instead.
        details: numbers and names behind the message.
    """

    default_code = "DP000"

    def __init__(self, message: str, *, code: str | None = None, hint: str = "", **details: Any):
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.hint = hint
        self.details = details

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\nHint: {self.hint}"
        return self.message


class InterfaceError(Error):
    default_code = "DP100"


class DatabaseError(Error):
    default_code = "DP200"


class DataError(DatabaseError):
    default_code = "DP600"


class OperationalError(DatabaseError):
    default_code = "DP400"


class IntegrityError(DatabaseError):
    default_code = "DP610"


class InternalError(DatabaseError):
    default_code = "DP500"

    def __init__(self, message: str, **kwargs: Any):
        kwargs.setdefault("hint", "this is a bug in dpgate; please report it")
        super().__init__(message, **kwargs)


class ProgrammingError(DatabaseError):
    default_code = "DP200"


class NotSupportedError(DatabaseError):
    default_code = "DP222"


class ParseError(ProgrammingError):
    """The SQL text does not parse (strictly) in dpgate's dialect."""

    default_code = "DP201"


class UnsupportedQueryError(ProgrammingError):
    """The query parses but has a shape dpgate cannot answer with a DP guarantee."""

    default_code = "DP210"


class PolicyError(ProgrammingError):
    """The data owner's declarations or caps do not allow this."""

    default_code = "DP300"


class BudgetExceededError(OperationalError):
    """Answering would exceed the analyst's quota or the subjects' budgets."""

    default_code = "DP400"


__all__ = [
    "BudgetExceededError",
    "DataError",
    "DatabaseError",
    "Error",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "NotSupportedError",
    "OperationalError",
    "ParseError",
    "PolicyError",
    "PopulationWarning",
    "ProgrammingError",
    "UnsupportedQueryError",
    "Warning",
]
