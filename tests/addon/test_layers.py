"""The layers of the code, checked on the import graph of the source (ast, imports inside
functions included, relative imports resolved):

- no import cycles between modules of solver/, signsim_addon/, operators/ and panels/;
- solver/ imports nothing of the add-on; a solver subpackage imports only solver/core/
  and itself, and core/ only itself;
- an add-on capability reaches another capability only through its api.py, and body/ (what
  the capabilities share) reaches none;
- operators and panels reach the add-on only through a capability's api.py (and
  errors.py), never solver/ or a CLI module.

The add-on's known exceptions are listed with their reason; the check fails when one of
them no longer occurs, so the list can only shrink."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAPABILITIES = {"library", "retarget", "compose", "bake", "demo", "resolve", "softface"}
PACKAGES = ("solver", "signsim_addon", "operators", "panels")

# (importer, imported): a capability reaching into another one's internals. Each is to be
# replaced by the shared body/ package or a documented api.py function (issue 33).
CAPABILITY_EXCEPTIONS = {}


def _imports(path, root):
    """Imported modules of one file as tuples of names from the repository root (relative
    imports resolved; `from pkg import name` also yields pkg.name)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            here = path.parent.relative_to(root).parts
            base = here[:len(here) - (node.level - 1)] if node.level else ()
            module = tuple(base) + (tuple(node.module.split(".")) if node.module else ())
            out.append(module)
            out += [module + (a.name,) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [tuple(a.name.split(".")) for a in node.names]
    return out


def _offenders(root):
    """(offending imports, number of add-on imports checked) of operators/ and panels/."""
    offenders, seen = [], 0
    for folder in ("operators", "panels"):
        for path in sorted((root / folder).glob("*.py")):
            for m in _imports(path, root):
                if m[0] == "solver" or "cli" in m:
                    offenders.append(f"{folder}/{path.name}: {'.'.join(m)}")
                elif m[0] == "signsim_addon" and len(m) > 1:
                    seen += 1
                    allowed = m[1] == "errors" or (m[1] in CAPABILITIES and (len(m) == 2 or m[2] == "api"))
                    if not allowed:
                        offenders.append(f"{folder}/{path.name}: {'.'.join(m)}")
    return offenders, seen


def import_graph(root, packages=PACKAGES):
    """{module: {module}}: the modules (dotted names; a package is its __init__.py) of the
    given top-level packages under `root` and the modules of the same tree each imports,
    anywhere in the file (inside functions too). An imported name that is a module counts
    as that module (`from . import quat`), else the module it is taken from."""
    paths = {}
    for pkg in packages:
        for p in sorted((root / pkg).rglob("*.py")):
            parts = p.relative_to(root).with_suffix("").parts
            paths[parts[:-1] if parts[-1] == "__init__" else parts] = p
    graph = {}
    for mod, path in paths.items():
        here = mod if path.name == "__init__.py" else mod[:-1]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                base = here[:len(here) - (node.level - 1)] if node.level else ()
                module = tuple(base) + (tuple(node.module.split(".")) if node.module else ())
                for a in node.names:
                    edges.add(module + (a.name,) if module + (a.name,) in paths else module)
            elif isinstance(node, ast.Import):
                edges.update(tuple(a.name.split(".")) for a in node.names)
        graph[".".join(mod)] = {".".join(e) for e in edges if e in paths and e != mod}
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def solver_offenders(graph):
    """[(importer, imported)] edges that break the solver's layers."""
    out = []
    for a, targets in graph.items():
        if a.split(".")[0] != "solver":
            continue
        for b in targets:
            pa, pb = a.split("."), b.split(".")
            if pb[0] != "solver":
                out.append((a, b))
            elif len(pb) > 2 and len(pa) > 2 and pb[1] not in (pa[1], "core"):
                out.append((a, b))
    return sorted(out)


def capability_offenders(graph):
    """[(importer, imported)] edges from one add-on capability into another's internals."""
    out = []
    for a, targets in graph.items():
        pa = a.split(".")
        if pa[0] != "signsim_addon" or len(pa) < 3 or pa[1] not in CAPABILITIES:
            continue
        for b in targets:
            pb = b.split(".")
            if (pb[0] == "signsim_addon" and len(pb) > 1 and pb[1] in CAPABILITIES and pb[1] != pa[1]
                    and pb[2:] not in ([], ["api"])):
                out.append((a, b))
    return sorted(out)


def test_no_import_cycles():
    graph = import_graph(ROOT)
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the walk sees the tree
    assert cycles(graph) == []


def test_solver_subpackages_import_only_core_and_themselves():
    graph = import_graph(ROOT)
    assert any(a.startswith("solver.physics.") and b.startswith("solver.core.") for a in graph for b in graph[a])
    assert [p.name for p in (ROOT / "solver").glob("*.py")] == ["__init__.py"]
    assert solver_offenders(graph) == []


def test_capabilities_reach_each_other_only_through_api():
    found = set(capability_offenders(import_graph(ROOT)))
    assert found - set(CAPABILITY_EXCEPTIONS) == set()
    assert set(CAPABILITY_EXCEPTIONS) - found == set()  # fixed: remove it from the list


# the root modules every capability stands on (docs/development.md); properties, preferences,
# translations and the CLI dispatcher sit above the capabilities and gather from them
SHARED_BASE = ("signsim_addon.compat", "signsim_addon.keys", "signsim_addon.files", "signsim_addon.errors")


def body_offenders(graph):
    """[(importer, imported)] edges from signsim_addon/body/ or the shared base modules up
    into a capability."""
    return sorted((a, b) for a, targets in graph.items()
                  if a.startswith("signsim_addon.body.") or a in SHARED_BASE
                  for b in targets if b.split(".")[:2][-1] in CAPABILITIES and b.startswith("signsim_addon."))


def test_body_and_the_shared_base_import_no_capability():
    graph = import_graph(ROOT)
    assert any(a.startswith("signsim_addon.body.") for a in graph) and all(m in graph for m in SHARED_BASE)
    assert body_offenders(graph) == []


def test_operators_and_panels_import_only_capability_apis():
    offenders, seen = _offenders(ROOT)
    assert seen >= 10  # the check sees the imports it is about
    assert offenders == []


def test_the_check_catches_solver_cli_and_internal_imports(tmp_path):
    (tmp_path / "operators").mkdir()
    (tmp_path / "panels").mkdir()
    (tmp_path / "operators" / "probe.py").write_text(
        "from ..solver import quat\nfrom ..signsim_addon.bake import cli\n"
        "from ..signsim_addon.retarget import transfer\nfrom ..signsim_addon.bake import api\n")
    offenders, _seen = _offenders(tmp_path)
    assert offenders == ["operators/probe.py: solver", "operators/probe.py: solver.quat",
                         "operators/probe.py: signsim_addon.bake.cli",
                         "operators/probe.py: signsim_addon.retarget.transfer"]


def test_the_checks_catch_a_cycle_and_layer_breaks(tmp_path):
    """A temporary tree: a cycle whose one edge is an import inside a function, a physics
    module importing retarget, core importing physics, a capability importing another's
    internals and body/ importing a capability."""
    files = {
        "solver/__init__.py": "",
        "solver/core/__init__.py": "",
        "solver/core/a.py": "from . import b\n",
        "solver/core/b.py": "def f():\n    from .a import g\n    return g\n",
        "solver/core/c.py": "from ..physics import p\n",
        "solver/physics/__init__.py": "",
        "solver/physics/p.py": "from ..core import a\nfrom ..retarget.r import x\n",
        "solver/retarget/__init__.py": "",
        "solver/retarget/r.py": "x = 1\n",
        "signsim_addon/__init__.py": "",
        "signsim_addon/bake/__init__.py": "",
        "signsim_addon/bake/api.py": "def go():\n    from ..resolve import skin\n    from ..resolve import api\n",
        "signsim_addon/resolve/__init__.py": "",
        "signsim_addon/resolve/api.py": "",
        "signsim_addon/resolve/skin.py": "",
        "signsim_addon/body/__init__.py": "",
        "signsim_addon/body/rig.py": "from ..bake import api\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path)
    assert cycles(graph) == [["solver.core.a", "solver.core.b"]]
    assert solver_offenders(graph) == [("solver.core.c", "solver.physics.p"),
                                       ("solver.physics.p", "solver.retarget.r")]
    assert capability_offenders(graph) == [("signsim_addon.bake.api", "signsim_addon.resolve.skin")]
    assert body_offenders(graph) == [("signsim_addon.body.rig", "signsim_addon.bake.api")]
    (tmp_path / "solver/core/b.py").write_text("def f():\n    return 1\n")
    assert cycles(import_graph(tmp_path)) == []
