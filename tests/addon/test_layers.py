"""Operators and panels stay thin: they reach the add-on only through a capability's
api.py (and errors.py), never solver/ or a CLI module."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAPABILITIES = {"library", "retarget", "compose", "bake", "demo", "resolve", "softface"}


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
