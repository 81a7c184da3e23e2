"""Value generalization hierarchies: the owner's public trees of how a column's values coarsen.

A hierarchy is a tree whose leaves are the column's values (or, for a numeric column, its
finest declared intervals) and whose inner nodes are coarser labels; the root ``*`` suppresses
the column. The supermodular release (``mechanisms.supermodular``) writes each kept record as
one node per column. Like domains and bounds, a hierarchy is a **public fact**: it must come from
a codebook or a standard, never from the rows (a group made of the values present in the table,
or interval edges at the data's quantiles, would leak outside the ε accounting).

Declared in a policy file::

    [tables.adult.columns.education.hierarchy]      # nested tables / lists: groups of groups
    "No diploma" = ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th"]
    "High school" = ["HS-grad"]
    "College" = { "Some college" = ["Some-college", "Assoc-voc", "Assoc-acdm"], "Degree" = [...] }

    [tables.adult.columns.age]
    bounds = [17, 90]
    hierarchy = { widths = [5, 10, 20] }            # numeric: bands aligned to multiples
    # or hierarchy = { breaks = [[17, 25, 35, 45, 55, 65, 91], [17, 45, 91]] }   finest first

Rules (each refused with DP327): every label appears once in a tree (leaves included), ``*`` is
reserved, no group is empty, leaves are values of the declared domain and every declared value
is a leaf (a declared NULL gets its own leaf under the root); interval levels nest, cover the
bounds, and grow coarser upwards. Values outside the tree (or outside the domain) generalize to
``*``: a fixed function of each row, so it never depends on other rows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpgate import errors

ROOT = "*"
#: Nodes in one column's tree (leaves and groups).
MAX_NODES = 10_000


@dataclass(frozen=True)
class Hierarchy:
    """One column's tree: node 0 is the root ``*``; ``parent[0] == -1``."""

    column: str
    kind: str  # "values" (leaves are values) or "intervals" (leaves are the finest intervals)
    labels: tuple[str | None, ...]  # None: the NULL leaf
    parent: tuple[int, ...]
    leaf_values: tuple[tuple[int, Any], ...]  # (node, value) of every leaf; intervals: (node, index)
    breaks: tuple[float, ...] = ()  # intervals kind: the finest level's edges
    lower: float | None = None
    upper: float | None = None

    @property
    def depth(self) -> np.ndarray:
        d = np.zeros(len(self.parent), dtype=np.int64)
        for i in range(1, len(self.parent)):  # parents precede their children
            d[i] = d[self.parent[i]] + 1
        return d

    @property
    def height(self) -> int:
        return int(self.depth.max())

    def ancestors(self) -> np.ndarray:
        """``A[node, level]``: the node's ancestor at depth ``level`` (−1 below the node's own depth)."""
        depth = self.depth
        out = np.full((len(self.parent), self.height + 1), -1, dtype=np.int64)
        for node in range(len(self.parent)):
            n = node
            while n >= 0:
                out[node, depth[n]] = n
                n = self.parent[n]
        return out

    def leaves_under(self) -> list[list[int]]:
        """The leaf nodes under every node (a leaf covers itself)."""
        children: list[list[int]] = [[] for _ in self.parent]
        for i, p in enumerate(self.parent):
            if p >= 0:
                children[p].append(i)
        out: list[list[int]] = [[] for _ in self.parent]
        for node in reversed(range(len(self.parent))):
            out[node] = [node] if not children[node] else [x for c in children[node] for x in out[c]]
        return out

    def describe(self) -> str:
        kids = sum(1 for p in self.parent if p == 0)
        leaves = len(self.leaf_values)  # every node without children is a leaf, listed there
        what = "intervals" if self.kind == "intervals" else "values"
        return f"{leaves} leaf {what} in {len(self.parent)} nodes, height {self.height}, {kids} under *"

    def to_json(self) -> str:
        return json.dumps({
            "kind": self.kind, "labels": list(self.labels), "parent": list(self.parent),
            "leaf_values": [list(p) for p in self.leaf_values], "breaks": list(self.breaks),
            "lower": self.lower, "upper": self.upper,
        })  # fmt: skip (``Owner`` stores the declaration beside it, as "spec")

    @classmethod
    def from_json(cls, column: str, text: str | Mapping) -> Hierarchy:
        """A stored tree, checked for the shape every walk over it relies on (parents first)."""
        d = json.loads(text) if isinstance(text, str) else text
        parent = tuple(int(p) for p in d["parent"])
        labels = tuple(d["labels"])
        ok = (len(parent) == len(labels) >= 1 and parent[0] == -1 and labels[0] == ROOT
              and all(0 <= p < i for i, p in enumerate(parent) if i))  # fmt: skip
        leaves = tuple((int(n), v) for n, v in d["leaf_values"])
        ok = ok and all(0 < n < len(parent) for n, _ in leaves) and len({json.dumps(x) for x in labels}) == len(labels)
        if not ok:
            raise _bad(column, "the stored tree is malformed", "declare it again (Owner.declare(..., hierarchy=...))")
        return cls(column, d["kind"], labels, parent, leaves, tuple(d["breaks"]), d["lower"], d["upper"])


def _bad(where: str, message: str, hint: str | None = None) -> errors.Error:
    return errors.PolicyError(f"Hierarchy of {where}: {message}", code="DP327", hint=hint)


def build(where: str, column: str, spec: Any, *, sql_type: str, numeric: bool, integer: bool,
          domain: Sequence[Any] | None, bounds: tuple[float, float] | None) -> Hierarchy:  # fmt: skip
    """The validated tree of a declaration (nested groups, or ``{widths|breaks = ...}`` for numbers)."""
    if numeric and isinstance(spec, Mapping) and set(spec) & {"widths", "breaks"}:
        return _intervals(where, column, spec, integer=integer, bounds=bounds)
    if numeric and domain is None:
        raise _bad(where, f"a {sql_type} column without a declared domain takes interval levels",
                   "hierarchy = { widths = [5, 10, 20] } or { breaks = [[...finest...], [...coarser...]] }, with bounds")
    return _values(where, column, spec, domain)


def _values(where: str, column: str, spec: Any, domain: Sequence[Any] | None) -> Hierarchy:
    labels: list[str | None] = [ROOT]
    parent: list[int] = [-1]
    leaves: list[tuple[int, Any]] = []
    seen: set[str] = {ROOT}

    def add(label: str | None, under: int) -> int:
        if len(labels) >= MAX_NODES:
            raise _bad(where, f"more than {MAX_NODES:,} nodes")
        key = json.dumps(label)
        if label == ROOT or key in seen:
            raise _bad(where, f"the label {label!r} appears twice" if label != ROOT else "'*' is the root's label",
                       "every group and value appears once in a tree (check spellings such as Europe / Europa)")
        seen.add(key)
        labels.append(label)
        parent.append(under)
        return len(labels) - 1

    def walk(node: Any, under: int, path: str) -> None:
        if isinstance(node, Mapping):
            if not node:
                raise _bad(where, f"the group {path or '*'} is empty")
            for label, children in node.items():
                if not isinstance(label, str) or not label.strip():
                    raise _bad(where, f"group labels are non-empty strings, got {label!r}")
                walk(children, add(label, under), label)
        elif isinstance(node, (list, tuple)):
            if not node:
                raise _bad(where, f"the group {path or '*'} is empty")
            for child in node:
                if isinstance(child, (Mapping, list, tuple)):
                    walk(child, under, path)
                elif isinstance(child, (str, int, float, bool)) and not (isinstance(child, float) and not math.isfinite(child)):
                    leaves.append((add(_leaf_label(child), under), child))
                else:
                    raise _bad(where, f"{child!r} is neither a value nor a group")
        else:
            raise _bad(where, f"the group {path or '*'} must list its members, got {node!r}",
                       'write group = ["value", ...] or group = { subgroup = [...] }')

    walk(spec, 0, "")
    if not leaves:
        raise _bad(where, "it has no values")
    if domain is not None:
        declared = {json.dumps(v): v for v in domain if v is not None}
        listed = {json.dumps(v) for _, v in leaves}
        extra = [v for _, v in leaves if json.dumps(v) not in declared]
        if extra:
            raise _bad(where, f"{extra[0]!r} is not in the declared domain", "leaves are the domain's values")
        missing = [v for k, v in declared.items() if k not in listed]
        if missing:
            raise _bad(where, f"the declared value {missing[0]!r} is not a leaf ({len(missing)} missing)",
                       "every declared value belongs to one group")
        if any(v is None for v in domain):
            leaves.append((add(None, 0), None))  # the declared NULL: its own leaf under the root
    # Parents must precede children (depth and ancestors rely on it): true by construction.
    return Hierarchy(column, "values", tuple(labels), tuple(parent), tuple(leaves))


def _leaf_label(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _intervals(where: str, column: str, spec: Mapping, *, integer: bool,
               bounds: tuple[float, float] | None) -> Hierarchy:  # fmt: skip
    if bounds is None:
        raise _bad(where, "interval levels need the column's bounds", "declare bounds = [lower, upper] too")
    if set(spec) - {"widths", "breaks"} or len(spec) != 1:
        raise _bad(where, "give either widths or breaks", "hierarchy = { widths = [5, 10, 20] }")
    lo, hi = float(bounds[0]), float(bounds[1])
    levels: list[list[float]] = []
    if "widths" in spec:
        widths = spec["widths"]
        if not isinstance(widths, (list, tuple)) or not widths or not all(_number(w) and w > 0 for w in widths):
            raise _bad(where, "widths is a list of positive numbers, finest first")
        for a, b in zip(widths, widths[1:]):
            ratio = b / a
            if ratio < 2 - 1e-9 or abs(ratio - round(ratio)) > 1e-9:
                raise _bad(where, f"width {b:g} is not a multiple (at least twice) of {a:g}", "e.g. widths = [5, 10, 20]")
        top = math.floor(hi) + 1 if integer else hi  # intervals are [a, b); the last one ends at top
        for w in widths:  # bands aligned to multiples of w, cut at the bounds
            inner = range(math.floor(lo / w) + 1, math.ceil(top / w))
            levels.append([lo] + [float(m * w) for m in inner if lo < m * w < top] + [float(top)])
    else:
        raw = spec["breaks"]
        if not isinstance(raw, (list, tuple)) or not raw or not all(isinstance(lv, (list, tuple)) for lv in raw):
            raise _bad(where, "breaks is a list of levels, each a list of interval edges, finest first")
        for lv in raw:
            if len(lv) < 2 or not all(_number(e) for e in lv) or any(b <= a for a, b in zip(lv, lv[1:])):
                raise _bad(where, f"the level {list(lv)} is not increasing numbers (at least two edges)")
            levels.append([float(e) for e in lv])
    finest = levels[0]
    top_ok = finest[-1] > hi if integer else finest[-1] >= hi
    if finest[0] > lo or not top_ok:
        raise _bad(where, f"the edges {finest[0]:g} … {finest[-1]:g} do not cover the bounds [{lo:g}, {hi:g}]",
                   "the first edge ≤ lower, the last > upper (≥ upper for a real column)")
    for fine, coarse in zip(levels, levels[1:]):
        if coarse[0] != fine[0] or coarse[-1] != fine[-1] or not set(coarse) <= set(fine) or len(coarse) >= len(fine):
            raise _bad(where, "each level must merge intervals of the level below (same ends, a subset of its edges)")
    if len(levels[-1]) == 2:
        levels.pop()  # one interval over everything is the root itself
    if sum(len(lv) - 1 for lv in levels) + 1 > MAX_NODES:
        raise _bad(where, f"more than {MAX_NODES:,} nodes")
    labels: list[str | None] = [ROOT]
    parent: list[int] = [-1]
    spans: list[tuple[float, float] | None] = [None]
    ids_above: list[int] = []
    above_edges = np.empty(0)
    for lv in reversed(levels):  # coarsest first, so parents precede children
        ids = []
        for a, b in zip(lv, lv[1:]):
            up = ids_above[int(np.searchsorted(above_edges, a, side="right")) - 1] if ids_above else 0
            if spans[up] == (a, b):  # the same band one level down (cut at the bounds): one node
                ids.append(up)
                continue
            labels.append(_interval_label(a, b, lo, hi, integer))
            parent.append(up)
            spans.append((a, b))
            ids.append(len(labels) - 1)
        ids_above, above_edges = ids, np.asarray(lv)
    if len(set(labels)) != len(labels):
        raise _bad(where, "two intervals get the same label", "check that the levels nest")
    leaves = tuple((node, i) for i, node in enumerate(ids_above))  # (node, index of the finest interval)
    return Hierarchy(column, "intervals", tuple(labels), tuple(parent), leaves, tuple(finest), lo, hi)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _interval_label(a: float, b: float, lo: float, hi: float, integer: bool) -> str:
    if integer:
        first, last = max(math.ceil(a), math.ceil(lo)), min(math.ceil(b) - 1, math.floor(hi))
        return f"{first}" if first == last else f"{first}-{last}"
    return f"[{max(a, lo):g}, {min(b, hi):g}{']' if b >= hi else ')'}"


def leaf_of_numbers(h: Hierarchy, values: np.ndarray) -> np.ndarray:
    """The leaf node of each value of an intervals hierarchy (clamped to the bounds; NaN → root)."""
    v = np.asarray(values, dtype=np.float64)
    nan = np.isnan(v)
    clamped = np.clip(np.where(nan, h.lower, v), h.lower, h.upper)
    idx = np.searchsorted(np.asarray(h.breaks), clamped, side="right") - 1
    idx = np.clip(idx, 0, len(h.breaks) - 2)
    node = np.array([n for n, _ in sorted(h.leaf_values, key=lambda p: p[1])], dtype=np.int64)
    return np.where(nan, 0, node[idx]).astype(np.int64)


def from_options(options: Mapping[str, Any]) -> dict[str, Hierarchy]:
    out = {}
    for c, d in (options.get("hierarchies") or {}).items():
        if not isinstance(d, Mapping) or "spec" not in d:  # stored without its declaration: cannot be re-checked
            raise _bad(c, "the stored tree has no declaration to check it against",
                       "the owner declares it again (Owner.declare(..., hierarchy=...))")
        out[c] = Hierarchy.from_json(c, d)
    return out
