"""Binding a statement's parameters (``?``, ``$n``, ``:name``) into its tree, as literals.

The values become SQL literals in the checked tree, so what is checked is what runs; a value that
cannot be written back exactly (a non-finite number, a number of too many digits) is written as
the DOUBLE it stands for or refused (DP604).
"""

from __future__ import annotations

import decimal
import math
from typing import Any

from sqlglot import exp

from dpgate import errors
from dpgate.frontend.dialect import DPDuckDB, parse_one, to_sql


#: The most digits a bound number may have (written out as SQL text, digit by digit).
MAX_PARAMETER_DIGITS = 1000


def bind_parameters(statement: exp.Expr, params: Any) -> exp.Expr:
    """Replace placeholders by literal values (DP queries are planned on the bound statement)."""
    positional = list(params) if isinstance(params, (list, tuple)) else None
    named = dict(params) if isinstance(params, dict) else None
    if positional is None and named is None:
        raise errors.ProgrammingError("parameters must be a sequence or a mapping", code="DP601")
    counter = iter(range(10**9))

    def value_for(node: exp.Placeholder) -> Any:
        key = node.this
        if isinstance(node.parent, exp.Dot):
            # $1.5 (or ?.5) reads as the parameter, a dot and 5: bound to 30 it ran as 30.5 (DuckDB refuses it)
            raise errors.ProgrammingError(f"{node.sql()}.{node.parent.expression.sql()} is not a parameter: a "
                                          "parameter stands alone", code="DP602",
                                          hint="write $1, $2, ... (or ?) where a value goes")  # fmt: skip
        if key is None:
            if positional is None:
                raise errors.ProgrammingError("? placeholders need a sequence of parameters", code="DP601")
            i = next(counter)
            if i >= len(positional):
                raise errors.ProgrammingError(
                    f"Not enough parameters: the statement has more than {len(positional)} placeholders",
                    code="DP602",
                )
            return positional[i]
        key = str(key)
        if key.isascii() and key.isdigit():  # not '²', which isdigit() but int() refuses
            if positional is None or not 1 <= int(key) <= len(positional):
                raise errors.ProgrammingError(f"No parameter ${key}", code="DP602")
            return positional[int(key) - 1]
        if named is None or key not in named:
            raise errors.ProgrammingError(f"No parameter named ${key}", code="DP602")
        return named[key]

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder):
            value = value_for(node)
            try:
                # A number is written out digit by digit: 1e999999999 as a Decimal would be a gigabyte of
                # text built under the interpreter's lock (every session of a server waits), so a number of
                # more than MAX_PARAMETER_DIGITS digits is refused before it is written
                if isinstance(value, decimal.Decimal) and value.is_finite() and (
                    abs(value.adjusted()) > MAX_PARAMETER_DIGITS or len(value.as_tuple().digits) > MAX_PARAMETER_DIGITS
                ) or isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3.33 * MAX_PARAMETER_DIGITS:
                    raise errors.DataError(
                        f"A parameter has more than {MAX_PARAMETER_DIGITS:,} digits", code="DP604",
                        hint="pass a number of at most 1,000 digits (a DOUBLE beyond that range is infinite)",
                    )  # fmt: skip
                if isinstance(value, decimal.Decimal):
                    # exp.convert writes Decimal('NaN') as a bare NaN, which reads back as a column: a finite
                    # Decimal is written as its digits, a non-finite one as the DOUBLE it stands for
                    if value.is_finite():
                        return exp.Literal.number(format(value, "f"))
                    value = float(value)  # ValueError for a signalling NaN
                if isinstance(value, float) and not math.isfinite(value):
                    # exp.convert would write inf as a bare identifier and nan as NULL
                    return exp.cast(exp.Literal.string(repr(value)), exp.DataType.build("DOUBLE"))
                literal = exp.convert(value)
                parent = node.parent
                if isinstance(parent, exp.Bracket) and node.arg_key == "expressions" and len(parent.expressions) == 1:
                    # An element index: sqlglot keeps a list's indexes 0-based and adds DuckDB's offset (1)
                    # when it writes an integer one, so x[?] bound to 1 would read x[2]. Only where it will add
                    # it: a string's or a map's [?] keeps its value.
                    offset = DPDuckDB.INDEX_OFFSET - (parent.args.get("offset") or 0)
                    written = exp.apply_index_offset(parent.this.copy(), [literal.copy()], offset, dialect=DPDuckDB)
                    if written[0] != literal:
                        literal = exp.Literal.number(value - offset)
                return literal
            except ValueError as e:
                raise errors.DataError(f"Cannot use parameter value {value!r} in SQL", code="DP604") from e
        return node

    bound = statement.copy().transform(replace)
    if sum(1 for _ in bound.find_all(exp.Column)) != sum(1 for _ in statement.find_all(exp.Column)):
        # a parameter is a value: never a name (a guard should a value's SQL ever read back as one)
        raise errors.DataError("A parameter value would be read as a column name", code="DP604",
                               hint="pass numbers, text, booleans, dates or NULL")  # fmt: skip
    if positional is not None:
        used = sum(1 for n in statement.find_all(exp.Placeholder) if n.this is None)
        if used and used != len(positional):
            raise errors.ProgrammingError(
                f"The statement has {used} ? placeholders but {len(positional)} parameters were given",
                code="DP602",
            )
    # A bound string is written back out like any other [fixpoint]: read again what will run.
    return parse_one(to_sql(bound))
