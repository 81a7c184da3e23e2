"""The package layout: no import cycles, every module imports on its own, query classes are peers.

The import graph is read from the source (module-level imports only: an import inside a
function runs later and cannot cycle at import time). A cycle between dpgate modules fails.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from dpgate import queries

PACKAGE = Path(__file__).resolve().parents[1] / "dpgate"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(path: Path, name: str, *, top_level_only: bool) -> set[str]:
    """dpgate modules that ``name`` imports (at module level, or anywhere)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m in MODULES and m != name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_no_import_cycle_between_dpgate_modules():
    graph = {}
    for name, path in MODULES.items():
        deps = _imports(path, name, top_level_only=True)
        # importing a.b.c runs a/__init__ and a/b/__init__ first
        graph[name] = deps | {p for d in deps for p in _parents(d)}
    graph = {n: {m for m in deps if m != n and not n.startswith(m + ".")} for n, deps in graph.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def _parents(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in MODULES}


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_every_module_imports_alone_in_a_fresh_interpreter():
    names = sorted(n for n in MODULES if not n.endswith("__main__"))
    proc = subprocess.run([sys.executable, "-c", _import_each(names)], capture_output=True, text=True,
                          timeout=900)  # a hang guard: a loaded machine takes minutes  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "imported alone:" in proc.stdout


def _import_each(names: list[str]) -> str:
    """A script importing each module after forgetting every dpgate module imported before.

    Importing ``dpgate.x`` runs ``dpgate/__init__`` first, so every module that ``import dpgate``
    loads is imported exactly as ``import dpgate`` imports it: one fresh ``import dpgate`` covers
    them all, and only the modules it does not load are imported one by one."""
    return (
        "import importlib, sys\n"
        "def forget():\n"
        "    for m in [m for m in sys.modules if m == 'dpgate' or m.startswith('dpgate.')]:\n"
        "        del sys.modules[m]\n"
        "bad = []\n"
        "try:\n"
        "    importlib.import_module('dpgate')\n"
        "except Exception as e:\n"
        "    bad.append(f'dpgate: {type(e).__name__}: {e}')\n"
        "loaded = {m for m in sys.modules if m == 'dpgate' or m.startswith('dpgate.')}\n"
        "alone = 0\n"
        f"for name in {names!r}:\n"
        "    if name in loaded:\n"
        "        continue\n"
        "    forget()\n"
        "    alone += 1\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as e:\n"
        "        bad.append(f'{name}: {type(e).__name__}: {e}')\n"
        "print('\\n'.join(bad))\n"
        f"print('imported alone:', alone, 'of', {len(names)})\n"
        "sys.exit(1 if bad else 0)\n"
    )


CLASS_MODULES = list(queries.REGISTERED)


@pytest.mark.parametrize("name", CLASS_MODULES)
def test_a_query_class_imports_no_other_class(name):
    own = {n for n in MODULES if n == name or n.startswith(name + ".")}
    used = set()
    for n in own:
        used |= _imports(MODULES[n], n, top_level_only=False)
    others = {m for m in used for c in CLASS_MODULES if c != name and (m == c or m.startswith(c + "."))}
    assert not others, f"{name} imports {sorted(others)}"


def test_shared_query_modules_import_no_class():
    analysis = [n for n in MODULES if n == "dpgate.queries.analysis" or n.startswith("dpgate.queries.analysis.")]
    assert len(analysis) > 1  # the package and its parts
    for n in ("dpgate.queries.base", *analysis, "dpgate.plans", "dpgate.queries.bounds"):
        used = _imports(MODULES[n], n, top_level_only=False)
        assert not {m for m in used for c in CLASS_MODULES if m == c or m.startswith(c + ".")}, n


def test_the_gateway_has_no_per_class_code():
    source = (PACKAGE / "gateway.py").read_text()
    used = _imports(PACKAGE / "gateway.py", "dpgate.gateway", top_level_only=False)
    assert not {m for m in used for c in CLASS_MODULES if m == c or m.startswith(c + ".")}
    for plan_type in ("CountPlan", "TopKPlan", "SubgraphPlan", "SynthesisPlan"):
        assert plan_type not in source


def test_every_registered_class_has_the_protocol():
    from dpgate.plans import Plan
    from dpgate.queries.base import QueryClass

    names = set()
    for qc in queries.classes():
        assert isinstance(qc, QueryClass)
        for method in ("recognises", "plan", "bind_check", "explain_rows", "answer"):
            assert getattr(type(qc), method) is not getattr(QueryClass, method), (qc, method)  # no default
        # one name: the class's, its plans' and the ledger's
        assert issubclass(qc.plan_type, Plan) and qc.plan_type.query_class == qc.name
        names.add(qc.name)
    assert len(names) == len(queries.classes())


def test_public_names_keep_working():
    import dpgate
    from dpgate.interfaces.cli import main

    assert callable(dpgate.connect) and dpgate.Owner and callable(main)
    for name in ("Error", "ProgrammingError", "NotSupportedError", "OperationalError", "DatabaseError"):
        assert issubclass(getattr(dpgate, name), Exception)


#: The stages, lowest first. A module imports only modules of its own stage or a lower one,
#: function-level imports included: the privacy-critical lower stages (mechanisms, the catalog,
#: the ledger) can then be read without the code that calls them. The ledger sits above the
#: mechanisms because the debit runs the personalization mechanism (``mechanisms.pdp``) inside
#: its transaction.
STAGES = (
    ("dpgate.errors", "dpgate.codes", "dpgate.memo", "dpgate.resources", "dpgate.database", "dpgate.noise",
     "dpgate.scram"),
    ("dpgate.mechanisms",),
    ("dpgate.catalog",),
    ("dpgate.frontend",),
    ("dpgate.ledger",),
    ("dpgate.plans",),
    ("dpgate.release",),
    ("dpgate.backends",),
    ("dpgate.queries",),
    ("dpgate.statements", "dpgate.gateway", "dpgate.answers"),
    ("dpgate.interfaces", "dpgate.server", "dpgate.web", "dpgate.__main__"),
)


def _stage(name: str) -> int | None:
    for i, prefixes in enumerate(STAGES):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return i
    return None


def test_every_module_has_a_stage():
    assert [n for n in MODULES if n != "dpgate" and _stage(n) is None] == []


def test_stages_import_downward_only():
    upward = []
    for name, path in MODULES.items():
        if name == "dpgate":  # the package's public face re-exports the top stage
            continue
        for dep in _imports(path, name, top_level_only=False):
            if dep != "dpgate" and _stage(dep) > _stage(name):
                upward.append(f"{name} -> {dep}")
    assert upward == []


def test_the_import_reader_sees_function_level_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from dpgate.plans import CountPlan\n    from dpgate import gateway\n")
    assert {"dpgate.plans", "dpgate.gateway"} <= _imports(probe, "probe", top_level_only=False)


def test_noise_imports_nothing_but_the_errors():
    """``noise`` holds the samplers every mechanism draws from: it stays below them all."""
    assert _imports(MODULES["dpgate.noise"], "dpgate.noise", top_level_only=False) <= {"dpgate.errors"}


def test_the_server_never_imports_the_cli():
    # Owner commands are functions returning rows and messages; running the CLI's main under a
    # redirected stdout would let another thread's output land in an owner's reply.
    for name, path in MODULES.items():
        if name.startswith("dpgate.server"):
            assert "dpgate.interfaces.cli" not in _imports(path, name, top_level_only=False), name
