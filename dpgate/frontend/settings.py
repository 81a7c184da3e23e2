"""Per-query DP options and per-session defaults, validated strictly.

``OPTIONS (name = value, ...)`` on a query overrides the session's defaults, which
``SET dp_<name> = value`` changes. Unknown names and wrong types are refused with the
list of what is accepted; nothing is ever silently ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from dpgate import errors
from dpgate.frontend.nodes import DPOptions

#: Smallest ε a query may ask for (the noise sampler keeps a 1e-10 safety margin below it).
MIN_EPSILON = 1e-6
#: Largest ε a query may ask for: far past any meaningful privacy, and below where the ledger's
#: decimals (DECIMAL(38, 18)) and the mechanisms' exponentials stop being exact.
MAX_EPSILON = 1e6
#: Smallest alpha: a (1 - 1e-9) interval is already wider than anyone reads; below it the interval
#: searches of the noise distributions run out of floating-point precision.
MIN_ALPHA = 1e-9

#: An option value's number is read from at most this many characters (a longer one is refused, not
#: parsed: Python's int() of 10,000 digits is slow and refused, its float() is inf).
MAX_NUMBER_TEXT = 64
#: An integer option without a bound of its own is at most this (what the catalog and DuckDB's
#: INTEGER hold), a real-valued one at most ``FLOAT_LIMIT`` in magnitude and, unless zero, at least
#: ``FLOAT_FLOOR``: every option's value is then a number the mechanisms can compute with.
INT_LIMIT = 2**31 - 1
FLOAT_LIMIT = 1e12
FLOAT_FLOOR = 1e-12
#: Rows or groups one subject may contribute to a query: a query's noise scales with them, and past
#: this the noise at the smallest ε no longer fits the sampler's 53-bit scale.
MAX_CONTRIBUTION = 1_000_000

#: Top-k mechanisms (``mechanisms/topk.py``); the default measured best on the shipped baskets.
TOPK_METHODS = ("auto", "oneshot", "tps_pfm", "tps_em", "em", "laplace")  # auto: chosen from public facts

#: Rules dpgate knows for using subjects with personalized budgets (``mechanisms/pdp.py``).
PERSONALIZATION_RULES = ("minimum", "threshold", "sample", "partition", "t_round")


@dataclass(frozen=True)
class Spec:
    kind: str  # 'float' | 'int' | 'bool' | 'str' | 'ident'
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple[str, ...] | None = None
    session: bool = True
    #: The smallest magnitude of a non-zero real value (None: ``FLOAT_FLOOR``; 0: any).
    floor: float | None = None
    #: Whether ``high`` itself is refused (the bounds written before 0.19 exclude it).
    high_open: bool = True


SPECS: dict[str, Spec] = {
    "epsilon": Spec("float", "ε spent by the query", MIN_EPSILON, MAX_EPSILON, high_open=False),
    # a δ far below FLOAT_FLOOR is a meaningful request (the ledger charges it rounded up to 1e-18)
    "delta": Spec("float", "δ the query may spend (DP key selection)", 0.0, 1.0, floor=0.0),
    "alpha": Spec("float", "error bars are (1 - alpha) intervals", MIN_ALPHA, 1.0),
    "intervals": Spec("bool", "add <col>_ci_low / <col>_ci_high columns"),
    "clamp_counts": Spec("bool", "clamp noisy counts at zero (post-processing)"),
    "consistent": Spec("bool", "make a GROUP BY table of counts non-negative with its noisy total (Norm-Sub)"),
    "max_rows_contributed": Spec("int", "rows kept per subject (default: the table's max_rows)", 1, MAX_CONTRIBUTION,
                                 session=False, high_open=False),
    "max_groups_contributed": Spec("int", "groups kept per subject (default: the table's max_groups)", 1,
                                   MAX_CONTRIBUTION, session=False, high_open=False),
    "privacy_unit_column": Spec("ident", "must name the table's declared privacy unit", session=False),
    "personalization": Spec("str", "rule for subjects' personalized budgets", choices=PERSONALIZATION_RULES),
    "partitioning": Spec("str", "how partition / t_round split subjects", choices=("privacy", "utility")),
    "partitions": Spec("int", "number of partitions (default: chosen by predicted error)", 1, 64, session=False),
    "rounds": Spec("int", "rounds of t_round", 1, 16),
    "min_partition_size": Spec("int", "smallest partition of subjects", 1, None),
    "topk_method": Spec("str", "mechanism for ORDER BY COUNT(*) DESC LIMIT k queries", choices=TOPK_METHODS),
    "interval_share": Spec("float", "share of a subgraph count's ε spent on a tighter error bar (0: public bound)", 0.0, 1.0),
    "from_synopsis": Spec("str", "answer range counts free from this PrivTree synopsis (a release name)"),
    "confirm_share": Spec("float", "share of remaining quota above which the shell asks first", 0.0, 1.0, session=True),
    "fresh": Spec("bool", "draw a new answer and pay for it, even when this statement's answer is remembered"),
}

DEFAULTS: dict[str, Any] = {
    "epsilon": 0.1,
    "delta": 1e-6,
    "alpha": 0.05,
    "intervals": False,
    "clamp_counts": True,
    "consistent": False,
    "personalization": "sample",
    "partitioning": "utility",
    "rounds": 2,
    "min_partition_size": 100,
    "topk_method": "auto",
    "interval_share": 0.2,
    "confirm_share": 0.25,
    "fresh": False,
}


@dataclass(frozen=True)
class QuerySettings:
    """The effective settings of one query."""

    epsilon: float
    delta: float
    alpha: float
    intervals: bool
    clamp_counts: bool
    personalization: str
    partitioning: str = "utility"
    partitions: int | None = None
    rounds: int = 2
    min_partition_size: int = 100
    max_rows: int | None = None
    max_groups: int | None = None
    privacy_unit: str | None = None
    topk_method: str = "auto"
    interval_share: float = 0.2
    consistent: bool = False
    explicit: frozenset[str] = field(default_factory=frozenset)


def literal_value(node: exp.Expr, name: str) -> Any:
    """The Python value of an option's literal (numbers, strings, booleans, identifiers).

    Anything else — an expression, a cast, a list, a parameter left unbound — is refused (DP205):
    an option is a public fact of the statement, read as written, never computed."""
    if isinstance(node, exp.Paren):
        return literal_value(node.this, name)
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        return _number(node.this, name)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return -_number(node.this.this, name)
    if isinstance(node, (exp.Column, exp.Identifier, exp.Var)):
        return _Ident(node.name)
    if isinstance(node, exp.Null):
        return None
    raise errors.ProgrammingError(
        f"Option {name} needs a literal value, got {_clip(_sql(node))}",
        code="DP205",
        hint=f"write {name} = followed by a number (0.5, 1e-6), a quoted string, true/false, or a column name; "
        "not an expression, a cast or a parameter",
    )


def _clip(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _sql(node: exp.Expr) -> str:
    try:
        return node.sql(dialect="duckdb")
    except Exception:  # noqa: BLE001 - only for the message: sqlglot cannot write every tree back
        return node.key


class _Ident(str):
    """A bare identifier used as an option value."""


def _number(text: str, name: str) -> float | int:
    """A number literal's value; text too long to be a sensible option value is refused unread."""
    text = str(text)
    if len(text) > MAX_NUMBER_TEXT:
        raise errors.ProgrammingError(
            f"Invalid value for {name}: a number of {len(text):,} characters", code="DP205",
            hint=f"{name} takes a number written in at most {MAX_NUMBER_TEXT} characters (1e-6, 0.5, 1000)",
        )  # fmt: skip
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise _bad(name, text, "a number") from None


def coerce(name: str, value: Any, specs: dict[str, Spec] | None = None) -> Any:
    """Validate one setting's value; raise DP204/DP205 with what is accepted.

    Every value is checked against a finite range (the spec's own, else ``INT_LIMIT`` /
    ``FLOAT_LIMIT`` and ``FLOAT_FLOOR``), so what reaches planning is a number every mechanism
    can compute with: an absurd value is refused here, free, never failing later."""
    specs = SPECS if specs is None else specs
    spec = specs.get(name)
    if spec is None:
        raise errors.ProgrammingError(
            f"Unknown DP option {name!r}",
            code="DP204",
            hint="accepted options: " + ", ".join(sorted(specs)),
        )
    if spec.kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "on", "off"):
            return value.lower() in ("true", "on")
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise _bad(name, value, "true or false")
    if spec.kind == "ident":
        if isinstance(value, str):
            return value.lower()
        raise _bad(name, value, "a column name")
    if spec.kind == "str":
        if not isinstance(value, str):
            raise _bad(name, value, "a quoted string")
        value = value.lower()
        if spec.choices and value not in spec.choices:
            raise _bad(name, value, "one of " + ", ".join(repr(c) for c in spec.choices))
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(name, value, _range(spec))
    given = value
    if isinstance(value, float) and not math.isfinite(value):
        raise _bad(name, given, _range(spec))
    if spec.kind == "int":
        if isinstance(value, float) and not value.is_integer():
            raise _bad(name, given, _range(spec))
        value = int(value)
    else:
        value = float(value) + 0.0  # -0.0 is 0
    low, high = _limits(spec)
    if value < low or (spec.low_open and value == low) or value > high or (spec.high_open and value == high):
        raise _bad(name, given, _range(spec))
    if spec.kind == "float" and value != 0.0 and abs(value) < _floor(spec):
        raise _bad(name, given, _range(spec) + f", and 0 or at least {_floor(spec):g} in size")
    return value


def _limits(spec: Spec) -> tuple[float, float]:
    limit = INT_LIMIT if spec.kind == "int" else FLOAT_LIMIT
    low = -limit if spec.low is None else spec.low
    high = limit if spec.high is None else spec.high
    return low, high


def _floor(spec: Spec) -> float:
    return FLOAT_FLOOR if spec.floor is None else spec.floor


def _range(spec: Spec) -> str:
    """The values a numeric option takes, in words (for the hint)."""
    low, high = _limits(spec)
    what = "a whole number" if spec.kind == "int" else "a number"
    lo = f"{'above' if spec.low_open else 'from'} {_g(low)}"
    hi = f"{'below' if spec.high_open and spec.high is not None else 'up to'} {_g(high)}"
    return f"{what} {lo} {hi}"


def _g(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def _shown(value: Any) -> str:
    """A value for a message: at most 40 characters of its repr (a value may be 10,000 digits long)."""
    text = repr(value) if not isinstance(value, _Ident) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _bad(name: str, value: Any, wanted: str) -> errors.ProgrammingError:
    return errors.ProgrammingError(
        f"Invalid value {_shown(value)} for {name}", code="DP205", hint=f"{name} takes {wanted}"
    )


@dataclass
class Session:
    """Session defaults, changed by ``SET dp_<name> = value``."""

    values: dict[str, Any] = field(default_factory=lambda: dict(DEFAULTS))

    def set(self, name: str, value: Any) -> None:
        key = name.lower()
        if not key.startswith("dp_"):
            raise errors.NotSupportedError(
                f"SET {name} changes a DuckDB engine setting, which analysts may not do",
                code="DP221",
                hint="dpgate's own settings start with dp_: " + ", ".join(sorted("dp_" + k for k, s in SPECS.items() if s.session)),
            )
        key = key[3:]
        spec = SPECS.get(key)
        if spec is None or not spec.session:
            raise errors.ProgrammingError(
                f"Unknown dpgate setting {name!r}",
                code="DP204",
                hint="settings: " + ", ".join(sorted("dp_" + k for k, s in SPECS.items() if s.session)),
            )
        self.values[key] = coerce(key, value)

    def query_settings(self, options: DPOptions | None, params: Any = None) -> QuerySettings:
        values = dict(self.values)
        explicit = set()
        if options is not None:
            for opt in options.expressions:
                name = opt.option_name
                if name in explicit:
                    raise errors.ProgrammingError(
                        f"Option {name} is given twice", code="DP205", hint="give each option once"
                    )
                explicit.add(name)
                values[name] = coerce(name, literal_value(opt.expression, name))
        return QuerySettings(
            epsilon=values["epsilon"],
            delta=values["delta"],
            alpha=values["alpha"],
            intervals=values["intervals"],
            clamp_counts=values["clamp_counts"],
            personalization=values["personalization"],
            partitioning=values["partitioning"],
            partitions=values.get("partitions"),
            rounds=values["rounds"],
            min_partition_size=values["min_partition_size"],
            max_rows=values.get("max_rows_contributed"),
            max_groups=values.get("max_groups_contributed"),
            privacy_unit=values.get("privacy_unit_column"),
            topk_method=values["topk_method"],
            interval_share=values["interval_share"],
            consistent=values["consistent"],
            explicit=frozenset(explicit),
        )
