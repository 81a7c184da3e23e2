"""The error-code table (``dpgate/codes.py``) against the code: every code raised is in the table
with the class that raises it, and every code in the table is raised, so the table (and the
page docs/errors.md generated from it) says what clients will actually see.

Raise sites are read from the source with ``ast``, not by a regular expression, so that codes
passed through a helper (``cost.refuse(WORK, ...)``, subgraph's ``_refuse(...)``), a module
constant (``allowlist.SIZE``), a local variable or an object that carries a
code to a later refusal (``allowlist.Const``) are followed to the class that raises them. A call
this reader cannot follow fails the test rather than being skipped: a new kind of indirection
must be taught here (or written plainly at the raise site).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from dpgate import codes, errors

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dpgate"
WELL_FORMED = re.compile(r"DP[1-7]\d\d\Z")
DP_LITERAL = re.compile(r"DP\d{3}\Z")
ERROR_CLASSES = {
    name: cls for name, cls in vars(errors).items() if isinstance(cls, type) and issubclass(cls, errors.Error)
}

#: Calls with a ``code=`` this reader does not follow, and why that is right.
NOT_FOLLOWED = {
    ("dpgate.interfaces.remote", "_error"): "re-raises the class and code the server sent; the server raised them here",
}

#: Markers among a code expression's values: CARRIED is a code read back from a carrier
#: (``const.code``: any code a carrier was given); PARAM is the ``code`` parameter of a helper or
#: carrier itself, whose values are found at its calls.
CARRIED = object()
PARAM = object()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@dataclass
class _Module:
    name: str
    path: Path
    tree: ast.Module
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    constants: dict[str, ast.Constant] = field(default_factory=dict)  # NAME = "DPxxx"
    modules: dict[str, str] = field(default_factory=dict)  # alias -> dotted module
    names: dict[str, tuple[str, str]] = field(default_factory=dict)  # alias -> (module, name)
    defs: dict[str, ast.AST] = field(default_factory=dict)  # top-level functions and classes


@dataclass(frozen=True)
class _Callee:
    """A function or class that takes a code: a helper raises it, a carrier keeps it for later."""

    cls: type[errors.Error] | None  # None for a carrier
    index: int | None  # the code's position, if it may be passed positionally
    default: ast.expr | None
    module: _Module


def _parse() -> dict[str, _Module]:
    mods = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        mod = _Module(name, path, ast.parse(path.read_text()))
        for node in ast.walk(mod.tree):
            for child in ast.iter_child_nodes(node):
                mod.parents[child] = node
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in mod.tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                if isinstance(node.value.value, str) and DP_LITERAL.match(node.value.value):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            mod.constants[t.id] = node.value
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                mod.defs[node.name] = node
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    mod.modules[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:
                    mod.names[a.asname or a.name] = (base, a.name)
        mods[name] = mod
    for mod in mods.values():  # ``from pkg import module`` names a module
        for alias, (base, name) in list(mod.names.items()):
            if f"{base}.{name}" in mods:
                mod.modules[alias] = f"{base}.{name}"
    return mods


MODULES = _parse()


def _enclosing(mod: _Module, node: ast.AST) -> ast.FunctionDef | None:
    while node in mod.parents:
        node = mod.parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def _qualname(mod: _Module, node: ast.AST) -> str:
    names = []
    while node in mod.parents:
        node = mod.parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
    return ".".join(reversed(names)) or "<module>"


def _resolve(mod: _Module, func: ast.expr, scope: ast.AST | None = None) -> tuple[str, object] | None:
    """What a called name is: ("error", class), ("def", (module, node)) or None."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        target = mod.modules.get(func.value.id)
        if target == "dpgate.errors" and func.attr in ERROR_CLASSES:
            return "error", ERROR_CLASSES[func.attr]
        if target in MODULES and func.attr in MODULES[target].defs:
            return "def", (MODULES[target], MODULES[target].defs[func.attr])
        return None
    if not isinstance(func, ast.Name):
        return None
    while scope is not None:  # a function defined inside the caller
        for node in ast.walk(scope):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == func.id and node is not scope:
                return "def", (mod, node)
        scope = _enclosing(mod, scope)
    if func.id in mod.defs:
        return "def", (mod, mod.defs[func.id])
    if func.id in mod.names:
        base, name = mod.names[func.id]
        if base == "dpgate.errors" and name in ERROR_CLASSES:
            return "error", ERROR_CLASSES[name]
        if base in MODULES and name in MODULES[base].defs:
            return "def", (MODULES[base], MODULES[base].defs[name])
    return None


def _callee(mod: _Module, node: ast.AST) -> _Callee | None:
    """The helper or carrier ``node`` is, if it takes a ``code``."""
    if isinstance(node, ast.ClassDef):  # a dataclass with a ``code`` field carries it
        fields = [s for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
        for i, f in enumerate(fields):
            if f.target.id == "code":
                return _Callee(None, i, f.value, mod)
        return None
    args = node.args
    params = args.posonlyargs + args.args
    defaults = dict(zip([a.arg for a in params][len(params) - len(args.defaults) :], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    names = [a.arg for a in params]
    code = next((a for a in params + args.kwonlyargs if a.arg == "code"), None)
    if code is None or (code.annotation is not None and "str" not in ast.unparse(code.annotation)):
        return None  # no code, or another kind of code (``wire.auth(code: int)``)
    index = names.index("code") if "code" in names else None
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            kind = _resolve(mod, call.func)
            if kind and kind[0] == "error":
                for k in call.keywords:
                    if k.arg == "code" and isinstance(k.value, ast.Name) and k.value.id == "code":
                        return _Callee(kind[1], index, defaults.get("code"), mod)
    return _Callee(None, index, defaults.get("code"), mod)


@dataclass(frozen=True)
class Site:
    code: str
    cls: type[errors.Error]
    where: str


class _Reader:
    def __init__(self) -> None:
        self.sites: list[Site] = []
        self.carried: set[str] = set()
        self.carried_reads: list[tuple[type[errors.Error], str]] = []
        self.used: set[int] = set()  # ids of the DP literals followed to a raise or a carrier
        self.unfollowed: list[str] = []

    def values(self, mod: _Module, expr: ast.expr | None, at: ast.AST) -> set[object] | None:
        """The codes ``expr`` can be (CARRIED, PARAM as markers); None if it cannot be followed."""
        if expr is None:
            return None
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str) and DP_LITERAL.match(expr.value):
            self.used.add(id(expr))
            return {expr.value}
        if isinstance(expr, ast.IfExp):
            a, b = self.values(mod, expr.body, at), self.values(mod, expr.orelse, at)
            return None if a is None or b is None else a | b
        if isinstance(expr, ast.Attribute):
            target = mod.modules.get(expr.value.id) if isinstance(expr.value, ast.Name) else None
            if target in MODULES and expr.attr in MODULES[target].constants:
                return self.values(MODULES[target], MODULES[target].constants[expr.attr], at)
            if expr.attr == "code" and target is None:
                return {CARRIED}
            return None
        if isinstance(expr, ast.Name):
            fn = _enclosing(mod, at)
            if fn is not None:
                params = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
                if expr.id in [a.arg for a in params]:
                    return {PARAM}
                assigned = [
                    n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == expr.id for t in n.targets)
                ]  # fmt: skip
                if assigned:
                    out: set[object] = set()
                    for value in assigned:
                        got = self.values(mod, value, value)
                        if got is None:
                            return None
                        out |= got
                    return out
            if expr.id in mod.constants:
                return self.values(mod, mod.constants[expr.id], at)
            if expr.id in mod.names:
                base, name = mod.names[expr.id]
                if base in MODULES and name in MODULES[base].constants:
                    return self.values(MODULES[base], MODULES[base].constants[name], at)
        return None

    def add(self, mod: _Module, call: ast.Call, cls: type[errors.Error] | None, got: set[object]) -> None:
        where = f"{mod.path.relative_to(ROOT)}:{call.lineno} ({_qualname(mod, call)})"
        for v in got:
            if v is PARAM:
                continue
            if cls is None:  # kept by a carrier, raised where ``.code`` is read
                if v is not CARRIED:
                    self.carried.add(v)
            elif v is CARRIED:
                self.carried_reads.append((cls, where))
            else:
                self.sites.append(Site(v, cls, where))

    def read(self) -> None:
        for mod in MODULES.values():
            for call in ast.walk(mod.tree):
                if isinstance(call, ast.Call):
                    self.call(mod, call)
        for cls, where in self.carried_reads:
            for code in self.carried:
                self.sites.append(Site(code, cls, f"{where}, carried"))

    def call(self, mod: _Module, call: ast.Call) -> None:
        keyword = next((k.value for k in call.keywords if k.arg == "code"), None)
        kind = _resolve(mod, call.func, _enclosing(mod, call))
        if kind and kind[0] == "error":
            cls = kind[1]
            got = {cls.default_code} if keyword is None else self.values(mod, keyword, call)
            self.check(mod, call, got) and self.add(mod, call, cls, got)
            return
        callee = _callee(*kind[1]) if kind else None
        if callee is not None:
            expr = keyword
            if expr is None and callee.index is not None and len(call.args) > callee.index:
                expr = call.args[callee.index]
            if expr is None:  # the default, read in the callee's module
                got = self.values(callee.module, callee.default, call) if callee.default is not None else set()
            else:
                got = self.values(mod, expr, call)
            self.check(mod, call, got) and self.add(mod, call, callee.cls, got)
            return
        if keyword is not None and (mod.name, _qualname(mod, call)) not in NOT_FOLLOWED:
            self.unfollowed.append(f"{mod.path.relative_to(ROOT)}:{call.lineno}: {ast.unparse(call)[:100]}")

    def check(self, mod: _Module, call: ast.Call, got: set[object] | None) -> bool:
        if got is None:
            self.unfollowed.append(f"{mod.path.relative_to(ROOT)}:{call.lineno}: {ast.unparse(call)[:100]}")
            return False
        return True


def _read() -> _Reader:
    reader = _Reader()
    reader.read()
    return reader


READER = _read()


def _raised() -> dict[str, set[type[errors.Error]]]:
    out: dict[str, set[type[errors.Error]]] = defaultdict(set)
    for site in READER.sites:
        out[site.code].add(site.cls)
    return out


def test_every_code_passed_to_a_call_is_followed_to_its_class():
    assert READER.unfollowed == []
    assert len(READER.sites) >= 400  # the reader found the raise sites (about 450 when written)


def test_every_code_raised_is_in_the_table_with_its_class():
    wrong = [
        f"{s.where}: {s.code} raised as {s.cls.__name__}"
        for s in READER.sites
        if s.code not in codes.CODES or s.cls not in codes.CODES[s.code].classes
    ]
    assert wrong == []


def test_every_class_listed_for_a_code_raises_it():
    raised = _raised()
    stale = [
        f"{code}: {cls.__name__}"
        for code, entry in codes.CODES.items()
        for cls in entry.classes
        if code in raised and cls not in raised[code]
    ]
    assert stale == []


def test_every_code_in_the_table_is_raised():
    raised = set(_raised())
    dead = sorted(set(codes.CODES) - raised - set(codes.RAISED_ELSEWHERE))
    assert dead == []
    # an entry in RAISED_ELSEWHERE that the reader now finds is stale
    assert sorted(set(codes.RAISED_ELSEWHERE) & raised) == []
    assert all(reason.strip() for reason in codes.RAISED_ELSEWHERE.values())


def test_every_dp_literal_in_the_package_is_accounted_for():
    """A code written anywhere but at a raise is either a class's default or a reading of codes
    (the server's SQLSTATE map, a comparison); those must still name codes of the table."""
    unused, unknown = [], []
    for mod in MODULES.values():
        for node in ast.walk(mod.tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and DP_LITERAL.match(node.value)):
                continue
            parent = mod.parents.get(node)
            where = f"{mod.path.relative_to(ROOT)}:{node.lineno}"
            if mod.name == "dpgate.errors" and isinstance(parent, ast.Assign):
                continue  # a class's default_code, followed where the class is raised without a code
            if id(node) in READER.used:
                continue
            if isinstance(parent, (ast.Dict, ast.Compare)):
                if node.value not in codes.CODES:
                    unknown.append(f"{where}: {node.value}")
                continue
            unused.append(f"{where}: {node.value}")
    assert unused == [] and unknown == []


def test_codes_are_well_formed_unique_and_in_a_family():
    source = (PACKAGE / "codes.py").read_text()
    table = next(
        n.value for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == "CODES"
    )  # fmt: skip
    keys = [k.value for k in table.keys]
    assert len(keys) == len(set(keys)), "a code is written twice in CODES (the second silently wins)"
    assert keys == sorted(keys)
    prefixes = [f.prefix for f in codes.FAMILIES]
    assert len(prefixes) == len(set(prefixes))
    for code, entry in codes.CODES.items():
        assert WELL_FORMED.match(code), code
        assert codes.family(code).prefix in prefixes
        assert entry.classes and all(issubclass(c, errors.Error) for c in entry.classes), code
        assert len(set(entry.classes)) == len(entry.classes), code
        m = entry.meaning
        assert m and "\n" not in m and m.endswith(".") and not m[0].islower() and len(m) <= 160, code


def test_the_generated_table_has_one_row_per_code():
    rows = [line for line in codes.table().splitlines() if re.match(r"\| DP\d{3} \|", line)]
    assert [r.split(" | ")[0][2:] for r in rows] == sorted(codes.CODES)


def test_the_generator_prints_the_docs_section():
    out = subprocess.run(
        [sys.executable, "-m", "dpgate.codes"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out == codes.section()


def test_the_table_is_a_base_stage_module():
    # Any module may import the table (the server maps codes to SQLSTATEs, the CLI may list them),
    # so it imports nothing of dpgate but the errors it names.
    mod = MODULES["dpgate.codes"]
    imported = {a.name for n in ast.walk(mod.tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {f"{n.module}.{a.name}" for n in ast.walk(mod.tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert {m for m in imported if m.startswith("dpgate")} == {"dpgate.errors"}
