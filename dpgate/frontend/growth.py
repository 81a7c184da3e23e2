"""What each DuckDB function builds from its inputs, and what one call of it costs: the per-function
table behind ``built`` (the bounds of a public statement), with the size algebra both use.

A value's size is ``a * L + b + g * G``, kept as ``Size = (a, b, g)``: ``L`` the longest value stored
in the tables a statement reads (the owner's data), ``b`` the characters or list elements its constants
and parameters build, ``G`` the largest value an aggregate gathered (``string_agg``, ``list``, ...: as
large as the rows it read, which DuckDB's memory limit bounds while it gathers and nothing bounds
after). A product of two stored values counts as one (the owner chose them); a gathered value times a
stored or another gathered value has no bound (``inf``). A function not named here returns at most the
sum of its inputs; every entry below is one that returns more, works longer, or recurses, measured raw
on DuckDB 2.0.1 and 1.5.6 (64-row or one-row statements; times on one core of the shared machine):

- ``GROWTH``: escapes, encodings, case mapping: at most that many times the sum of the inputs;
- ``ZIPPING`` (``list_zip``): every list padded to the longest, so the longest times the count
  (2,000 elements and 60 one-element lists: 122,000 fields a row, 2 GB over 20,000 rows);
- ``SHAPED_BY_JSON`` (``from_json``, ``json_transform``): a structure with a list gives each element
  all of the list's fields (300 ``{}`` and 300 fields: 90,000 values from 4,000 characters);
- ``DEEP``: recursion once per nesting level of a JSON object: ``json_merge_patch`` killed DuckDB
  1.5.6 at 60,000 levels (a text ``string_agg`` gathers in 0.1 s); its inputs are bounded as quadratic
  work's are;
- ``HEAVY_ON_GATHERED``: one call over a gathered list that does tens of times the gathering's work,
  in one call no interrupt reaches (10 million gathered integers, gathered in 0.5 s: ``list_distinct``
  22 s, ``list_unique`` 19 s, ``map`` 16 s, ``list_reduce`` even of a sum 18 s; 3 million:
  ``list_intersect`` 20 s, ``list_has_any`` 6 s; 1 million: ``list_has_all`` 3.3 s; ``list_aggregate``
  with ``mode`` 28 s, ``entropy`` 26 s, ``histogram`` 9 s). What stays accepted on a gathered value
  costs at most about three times its gathering (sorting, slicing, searching, hashing, encoding);
- ``UNCOUNTED``: aggregates whose state DuckDB keeps outside its memory limit, sized by the rows they
  read: ``approx_top_k`` held 4.6 GB past a 1 GB limit in 5 s (100,000 groups), ``reservoir_quantile``
  3.7 GB past 1 GB (one group, 100 million rows) and 2.4 GB at its default sample (groups of 8,192);
  on DuckDB 1.x also ``approx_quantile``, ``bitstring_agg``, ``entropy``, ``histogram`` and ``mode``
  (2.9-5.6 GB past a 512 MB limit over 30 million rows; DuckDB 2.0 counts them);
- regular expressions: RE2's time per character grows with the compiled program once its DFA cache
  overflows (``(a|b){1000}c``, a 12-character pattern, took 32 s over 500,000 gathered characters;
  ``a[ab]{14}c``, 227 instructions, 12 s over 20 million, nine times their gathering; ``a[ab]{8}c`` no
  longer than the gathering): patterns are literals or parameters of at most
  ``cost.MAX_REGEX_PROGRAM`` instructions, as in DP statements, and at most
  ``MAX_PROGRAM_OVER_GATHERED`` over a gathered value;
- casts to ``BIGNUM`` convert decimal text in time quadratic in its digits (200,000 digits: 0.7 s;
  a chain of ``repeat`` and ``+ 0`` grew one past every bound): quadratic work.
"""

from __future__ import annotations

import math
import re

from sqlglot import exp

from dpgate.frontend import functions

Size = tuple[float, float, float]  # (a, b, g): at most a * L + b + g * G

FIXED = 32.0  # a number, a date, a boolean: its text
ZERO: Size = (0.0, 0.0, 0.0)
STORED: Size = (1.0, 0.0, 0.0)
GATHERED: Size = (0.0, 0.0, 1.0)
UNBOUNDED: Size = (math.inf, math.inf, math.inf)


def const(b: float) -> Size:
    return (0.0, float(b), 0.0)


def plus(*parts: Size) -> Size:
    return (sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts))


def widest(parts: list[Size]) -> Size:
    return tuple(max((p[i] for p in parts), default=0.0) for i in range(3))  # type: ignore[return-value]


def mul(x: float, y: float) -> float:
    """x * y with 0 * inf = 0 (nothing of an unbounded value is taken)."""
    return 0.0 if x == 0 or y == 0 else x * y


def scale(k: float, s: Size) -> Size:
    return (mul(k, s[0]), mul(k, s[1]), mul(k, s[2]))


def product(x: Size, y: Size) -> Size:
    """``x * y`` with ``L * L`` counted as ``L``; a gathered value times anything but a constant is
    unbounded (its rows times a stored value, or times its own rows)."""
    (a1, b1, g1), (a2, b2, g2) = x, y
    g = mul(g1, b2) + mul(g2, b1)
    if g1 and (a2 or g2) or g2 and a1:
        g = math.inf
    return (mul(a1, b2) + mul(a2, b1) + mul(a1, a2), mul(b1, b2), g)


def count(listed: Size) -> float:
    """How many elements a list of size ``listed`` may have for work done once per element: a gathered
    list's are its rows (no bound); a stored list's the owner's (their work is linear in ``L``)."""
    return math.inf if listed[2] > 0 else max(listed[1], 1.0)


#: Aggregates whose value grows with the rows they read.
GATHERING = {
    "string_agg", "group_concat", "listagg", "list", "array_agg", "histogram", "histogram_exact",
    "json_group_array", "json_group_object", "json_group_structure", "map_agg", "bitstring_agg",
    "lttb",  # DuckDB 2.0: at most its n points, at most its rows
}  # fmt: skip
GATHERING_NODES = (exp.GroupConcat, exp.ArrayAgg)
#: Growth of a function's output over the sum of its inputs (case mapping, escapes, encodings).
GROWTH = {
    "upper": 3, "lower": 3, "ucase": 3, "lcase": 3, "hex": 8, "to_hex": 8, "bin": 8, "to_binary": 8,
    "to_base64": 2, "base64": 2, "url_encode": 3, "to_json": 6, "json_quote": 6, "array_to_json": 6,
    "row_to_json": 6, "json_object": 6, "json_array": 6, "regexp_escape": 2, "strftime": 32, "translate": 4,
    # DuckDB 2.0's (measured on 2.0.1, with room): strftime as a macro; url_encode's escapes; a geometry's
    # GeoJSON text (about 2x its WKB); a VARIANT's and a bit string's sort keys (2.8x a list's text; a byte
    # per bit); ICU sort keys (``collation_growth``) as text: 6.25x as hex, 12x as an escaped BLOB (collate_zh)
    "json_copy_strftime_if_date": 32, "json_copy_strftime_if_timestamp": 32, "hive_partition_component": 3,
    "st_asgeojson": 4, "variant_comparator": 4, "bitstring_byte_comparable": 8, "icu_sort_key": 8,
}  # fmt: skip
#: Lambda calls: the list is the first argument, the lambda the last.
MAPPING = {"list_transform", "array_transform", "list_apply", "array_apply", "apply", "transform"}
FILTERING = {"list_filter", "array_filter", "filter"}
REDUCING = {"list_reduce", "array_reduce", "reduce"}
#: Edit distances and similarities: work is the product of the inputs' lengths.
QUADRATIC = {"levenshtein", "editdist3", "damerau_levenshtein", "jaro_similarity", "jaro_winkler_similarity"}
#: Apply an aggregate to a list by name: a separator argument repeats per element.
LIST_AGGREGATE = functions.BY_NAME
SELECTING = {"list_select", "array_select"}
ZIPPING = {"list_zip", "array_zip"}
SHAPED_BY_JSON = {"from_json", "from_json_strict", "json_transform", "json_transform_strict"}
DEEP = {"json_merge_patch"}
#: JSON functions that take a path: the path must be a literal without wildcards (or a list of them).
JSON_PATHS = {"json_extract", "json_extract_string", "json_extract_path", "json_extract_path_text", "json_value",
              "json_exists", "json_keys", "json_array_length", "json_type"}
#: Matching that backtracks: LIKE-style functions (an escape makes DuckDB backtrack).
LIKE_FUNCTIONS = {"like_escape", "not_like_escape", "ilike_escape", "not_ilike_escape"}
TEXT_TYPES = {"VARCHAR", "TEXT", "CHAR", "NVARCHAR", "NCHAR", "STRING", "JSON", "BLOB", "VARBINARY", "BINARY"}
#: Regular expressions (RE2): the pattern is the second argument.
REGEX_NODES = (exp.RegexpLike, exp.RegexpFullMatch, exp.RegexpExtract, exp.RegexpExtractAll, exp.RegexpReplace,
               exp.RegexpSplit, exp.SimilarTo)
REGEX = {"regexp_matches", "regexp_full_match", "regexp_extract", "regexp_extract_all", "regexp_replace",
         "regexp_split_to_array", "regexp_split_to_table", "string_split_regex", "str_split_regex"}
#: A regular expression over a gathered value: at most this many instructions (``a[ab]{8}c``, about 130,
#: costs what the gathering cost; ``a[ab]{14}c``, 227, nine times that).
MAX_PROGRAM_OVER_GATHERED = 128

_SET_HINT = "work on the rows instead (a join, IN, EXISTS, or GROUP BY), which an interrupt can stop"
#: One call over a gathered list that costs tens of times its gathering: what to write instead.
HEAVY_ON_GATHERED = {
    "array_distinct": "gather distinct values: list(DISTINCT x)", "list_distinct": "list(DISTINCT x)",
    "list_unique": "count(DISTINCT x) over the rows", "array_unique": "count(DISTINCT x) over the rows",
    "list_intersect": _SET_HINT, "array_intersect": _SET_HINT, "list_has_all": _SET_HINT,
    "array_contains_all": _SET_HINT, "array_contained_by": _SET_HINT, "array_overlaps": _SET_HINT,
    "array_has_any": _SET_HINT, "map": "map_agg(k, v) over the rows", "map_from_entries": "map_agg(k, v) over the rows",
    "list_mode": "mode(x) over the rows", "list_entropy": "entropy(x) over the rows",
    "list_histogram": "histogram(x) over the rows",
}  # fmt: skip
#: Aggregates that ``list_aggregate`` runs with that cost (a hash of values per element).
HEAVY_AGGREGATES = {"mode", "entropy", "histogram", "histogram_exact"}
#: Aggregates whose state DuckDB keeps outside its memory limit, as many entries as the rows they read.
UNCOUNTED = {
    "approx_top_k": "4.6 GB past a 1 GB limit in 5 s", "reservoir_quantile": "3.7 GB past a 1 GB limit",
}
UNCOUNTED_BEFORE_2 = {
    "approx_quantile": "3.0 GB past a 512 MB limit", "bitstring_agg": "5.6 GB past a 512 MB limit",
    "entropy": "2.9 GB past a 512 MB limit", "histogram": "2.9 GB past a 512 MB limit",
    "mode": "3.0 GB past a 512 MB limit",
}
#: Longest name or label (a STRUCT's field, an ENUM's label) in what an aggregate gathers: DuckDB keeps it
#: once in the type, and writes it once per element as text (``list({'<1,000 characters>': i})::VARCHAR``
#: held 3.1 GB past a 1 GB limit over 3 million rows, each element 8 bytes of memory).
MAX_GATHERED_NAME = 64


def uncounted(name: str, major: int) -> str | None:
    """What the aggregate ``name`` held past DuckDB's memory limit, when this DuckDB does not count it."""
    return UNCOUNTED.get(name) or (UNCOUNTED_BEFORE_2.get(name) if major < 2 else None)


def collation_growth(name: str) -> float:
    """An ICU sort key's size over its text's: ``icu_collate_<locale>`` (hex) and DuckDB 2.0's
    ``collate_<locale>`` (a BLOB, escaped as text); 1 for any other function."""
    return 8.0 if name.startswith("icu_collate_") else 16.0 if name.startswith("collate_") else 1.0


def type_text(to: exp.DataType) -> float:
    """The names and labels a type carries (a STRUCT's fields, an ENUM's labels, a UNION's tags): a value
    of it shows them as text, once per element of a list of it."""
    named = any(t.this in (exp.DataType.Type.STRUCT, exp.DataType.Type.ENUM, exp.DataType.Type.UNION)
                for t in to.find_all(exp.DataType))  # fmt: skip
    return float(len(to.sql(dialect="duckdb"))) if named else 0.0


def array_elements(to: exp.DataType) -> float:
    """Elements a fixed-size ARRAY type holds per value (``INT[100000][3]``: 300,000), 1 for any other:
    DuckDB allocates them all, a NULL's too."""
    out = 1.0
    for t in to.find_all(exp.DataType):
        for v in t.args.get("values") or []:
            if t.this == exp.DataType.Type.ARRAY and isinstance(v, exp.Literal) and not v.is_string:
                try:
                    out *= max(float(v.this), 1.0)
                except ValueError:
                    return math.inf
    return out


def is_bignum(to: exp.DataType) -> bool:
    return to.this == exp.DataType.Type.BIGNUM or "VARINT" in to.sql(dialect="duckdb").upper()


def longest_name(node: exp.Expr) -> int:
    """The longest field name or label in the types ``node``'s value may have: STRUCT keys, and the
    STRUCT, ENUM and UNION types it casts to."""
    longest = 0
    for n in node.walk():
        if isinstance(n, exp.PropertyEQ) and isinstance(n.this, (exp.Identifier, exp.Literal)):
            longest = max(longest, len(str(n.this.this)))
        elif isinstance(n, exp.DataType) and n.this == exp.DataType.Type.ENUM:
            longest = max([longest] + [len(str(e.this)) for e in n.expressions if isinstance(e, exp.Literal)])
        elif isinstance(n, exp.ColumnDef):
            longest = max(longest, len(n.name))
        elif isinstance(n, exp.Literal) and n.is_string and isinstance(n.parent, exp.Func) and (
                call_name(n.parent) in SHAPED_BY_JSON):  # fmt: skip
            longest = max([longest] + [len(k) for k in _JSON_KEY.findall(n.this)])  # a JSON structure's keys
    return longest


_JSON_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:')


#: Typed nodes whose sqlglot name is not DuckDB's.
_NODE_NAMES = {exp.JSONArray: "json_array", exp.JSONObject: "json_object", exp.TimeToStr: "strftime",
               exp.JSONFormat: "to_json", exp.ArrayToString: "array_to_string"}


def call_name(node: exp.Func) -> str:
    """The DuckDB function's name (sqlglot's class name is not: ``JSONArray`` writes ``j_s_o_n_array``)."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return _NODE_NAMES.get(type(node), node.sql_name().lower())
