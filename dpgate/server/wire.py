"""PostgreSQL's frontend/backend protocol, version 3: message framing, types and errors.

Only what the server needs: backend messages are built here as bytes, frontend messages are
parsed from ``(type byte, payload)``. Values travel in text format (what psql and psycopg use
by default); DuckDB types map to the PostgreSQL type a client expects (HUGEINT and DECIMAL to
numeric, VARCHAR to text, nested types to their text form).
"""

from __future__ import annotations

import datetime
import decimal
import math
import struct
import uuid
from typing import Any

from dpgate import errors

PROTOCOL_3 = 196608
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102

MAX_STARTUP = 10_000
MAX_AUTH_MESSAGE = 65_535  # a SASL message before login (PostgreSQL's PG_MAX_AUTH_TOKEN_LENGTH)
MAX_MESSAGE = 16 * 1024 * 1024  # any message after login (a Bind with its parameters)
MAX_QUERY = 1024 * 1024  # the text of a Query or a Parse: dpgate statements are short

# -- types ----------------------------------------------------------------------------------------
OID = {
    "BOOLEAN": 16, "BLOB": 17, "BIGINT": 20, "SMALLINT": 21, "INTEGER": 23, "VARCHAR": 25,
    "JSON": 114, "FLOAT": 700, "DOUBLE": 701, "DATE": 1082, "TIME": 1083, "TIMESTAMP": 1114,
    "TIMESTAMP WITH TIME ZONE": 1184, "INTERVAL": 1186, "DECIMAL": 1700, "UUID": 2950,
    "TINYINT": 21, "UTINYINT": 21, "USMALLINT": 23, "UINTEGER": 20, "UBIGINT": 1700,
    "HUGEINT": 1700, "UHUGEINT": 1700, "TIMESTAMP_S": 1114, "TIMESTAMP_MS": 1114, "TIMESTAMP_NS": 1114,
    "TIME WITH TIME ZONE": 1266,
}  # fmt: skip
TEXT_OID = 25
SIZE = {16: 1, 20: 8, 21: 2, 23: 4, 700: 4, 701: 8, 1082: 4, 1114: 8, 1184: 8}


def type_oid(duckdb_type: str) -> int:
    name = duckdb_type.upper()
    if name.startswith("DECIMAL"):
        return 1700
    if name.startswith("VARCHAR"):
        return TEXT_OID
    return OID.get(name, TEXT_OID)


def text_value(v: Any) -> bytes | None:
    """A value in PostgreSQL's text format."""
    if v is None:
        return None
    if isinstance(v, bool):
        return b"t" if v else b"f"
    if isinstance(v, float):
        if math.isnan(v):
            return b"NaN"
        if math.isinf(v):
            return b"Infinity" if v > 0 else b"-Infinity"
        return repr(v).encode()
    if isinstance(v, decimal.Decimal):
        return (format(v, "f") if v.is_finite() else "NaN").encode()
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ").encode()
    if isinstance(v, (datetime.date, datetime.time)):
        return v.isoformat().encode()
    if isinstance(v, datetime.timedelta):
        return f"{v.days} days {v.seconds} seconds {v.microseconds} microseconds".encode()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return b"\\x" + bytes(v).hex().encode()
    if isinstance(v, uuid.UUID):
        return str(v).encode()
    return str(v).encode("utf-8")


def param_value(raw: bytes | None, oid: int, binary: bool) -> Any:
    """A bound parameter as a Python value, by its declared type (text or binary format)."""
    if raw is None:
        return None
    try:
        return _param_value(raw, oid, binary)
    except (ValueError, ArithmeticError, UnicodeDecodeError) as e:  # decimal.InvalidOperation is one
        raise errors.DataError(f"A parameter is not a valid value of type oid {oid}", code="DP604",
                               hint="send parameters as text of their declared type") from e


def _param_value(raw: bytes, oid: int, binary: bool) -> Any:
    if binary:
        fmt = {16: "?", 21: "!h", 23: "!i", 20: "!q", 700: "!f", 701: "!d"}.get(oid)
        if fmt is not None and struct.calcsize(fmt) == len(raw):
            return struct.unpack(fmt, raw)[0]
        if oid in (25, 1043, 0, 705):
            return raw.decode("utf-8")
        raise errors.NotSupportedError(
            f"Binary parameters of type oid {oid} are not supported", code="DP701",
            hint="send the parameter in text format",
        )  # fmt: skip
    text = raw.decode("utf-8")
    if oid in (20, 21, 23, 26):
        return int(text)
    if oid in (700, 701):
        return float(text)
    if oid == 1700:
        return decimal.Decimal(text)
    if oid == 16:
        return text.lower() in ("t", "true", "1", "on", "yes", "y")
    if oid == 1082:
        return datetime.date.fromisoformat(text)
    if oid == 1114:
        return datetime.datetime.fromisoformat(text)
    return text


# -- framing ------------------------------------------------------------------------------------
def message(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(payload) + 4) + payload


def cstr(s: str) -> bytes:
    return s.encode("utf-8").replace(b"\x00", b"") + b"\x00"


class Reader:
    """Reads a frontend message's fields in order; a short or malformed payload raises."""

    def __init__(self, payload: bytes):
        self.data = payload
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolViolation("message shorter than its fields")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return struct.unpack("!h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack("!i", self._take(4))[0]

    def string(self) -> str:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise ProtocolViolation("string without its terminator")
        out = self.data[self.pos : end]
        self.pos = end + 1
        try:
            return out.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolViolation("string is not UTF-8") from e

    def raw(self, n: int) -> bytes:
        return self._take(n)

    def rest(self) -> bytes:
        return self._take(len(self.data) - self.pos)


class ProtocolViolation(Exception):
    """The client broke the protocol: answered with 08P01 and the connection is closed."""


# -- backend messages ------------------------------------------------------------------------------
def auth(code: int, data: bytes = b"") -> bytes:
    return message(b"R", struct.pack("!i", code) + data)


def parameter_status(name: str, value: str) -> bytes:
    return message(b"S", cstr(name) + cstr(value))


def backend_key(pid: int, secret: int) -> bytes:
    return message(b"K", struct.pack("!ii", pid, secret))


def ready(status: str) -> bytes:
    return message(b"Z", status.encode("ascii"))


def row_description(names: list[str], types: list[str]) -> bytes:
    out = [struct.pack("!h", len(names))]
    for name, typ in zip(names, types):
        oid = type_oid(typ)
        out.append(cstr(name) + struct.pack("!ihihih", 0, 0, oid, SIZE.get(oid, -1), -1, 0))
    return message(b"T", b"".join(out))


def data_row(values: tuple) -> bytes:
    out = [struct.pack("!h", len(values))]
    for v in values:
        t = text_value(v)
        out.append(struct.pack("!i", -1) if t is None else struct.pack("!i", len(t)) + t)
    return message(b"D", b"".join(out))


def command_complete(tag: str) -> bytes:
    return message(b"C", cstr(tag))


def parameter_description(oids: list[int]) -> bytes:
    return message(b"t", struct.pack("!H", len(oids)) + b"".join(struct.pack("!i", o) for o in oids))


NO_DATA = message(b"n")
PARSE_COMPLETE = message(b"1")
BIND_COMPLETE = message(b"2")
CLOSE_COMPLETE = message(b"3")
EMPTY_QUERY = message(b"I")
PORTAL_SUSPENDED = message(b"s")


def _fields(fields: dict[str, str]) -> bytes:
    return b"".join(k.encode("ascii") + cstr(v) for k, v in fields.items() if v) + b"\x00"


def error(sqlstate: str, text: str, *, detail: str = "", hint: str = "", severity: str = "ERROR") -> bytes:
    return message(b"E", _fields({"S": severity, "V": severity, "C": sqlstate, "M": text, "D": detail, "H": hint}))


def notice(text: str, *, detail: str = "", hint: str = "") -> bytes:
    return message(b"N", _fields({"S": "NOTICE", "V": "NOTICE", "C": "00000", "M": text, "D": detail, "H": hint}))


# -- errors ----------------------------------------------------------------------------------------
#: SQLSTATE of each dpgate error class (most specific first).
SQLSTATE: list[tuple[type, str]] = [
    (errors.BudgetExceededError, "53400"),  # configuration_limit_exceeded: a budget is spent
    (errors.ParseError, "42601"),  # syntax_error
    (errors.PolicyError, "42501"),  # insufficient_privilege: the owner's declarations say no
    (errors.UnsupportedQueryError, "0A000"),  # feature_not_supported
    (errors.NotSupportedError, "0A000"),
    (errors.ProgrammingError, "42000"),  # syntax_error_or_access_rule_violation
    (errors.DataError, "22000"),
    (errors.IntegrityError, "23000"),
    (errors.OperationalError, "58000"),  # system_error
    (errors.InternalError, "XX000"),
    (errors.InterfaceError, "08000"),
    (errors.Error, "58000"),
]


#: Codes whose SQLSTATE says more than their class's.
BY_CODE = {"DP708": "57014", "DP707": "25P02", "DP223": "42501", "DP713": "42501", "DP604": "22P02",
           "DP714": "54000", "DP715": "53000", "DP716": "53300", "DP717": "53300", "DP718": "57P05",
           "DP719": "55000"}  # fmt: skip


def sqlstate(e: errors.Error) -> str:
    if e.code in BY_CODE:
        return BY_CODE[e.code]
    for cls, state in SQLSTATE:
        if isinstance(e, cls):
            return state
    return "58000"


def error_for(e: errors.Error, *, severity: str = "ERROR") -> bytes:
    """An ErrorResponse: the message, the dpgate code and class in the detail, the hint."""
    detail = f"dpgate {e.code} ({type(e).__name__})"
    return error(sqlstate(e), e.message, detail=detail, hint=e.hint, severity=severity)
