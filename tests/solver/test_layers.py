"""The solver layer must never depend on Blender."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"bpy", "mathutils", "bmesh"}
SOURCES = sorted((ROOT / "solver").rglob("*.py"))
MODULES = sorted(".".join(p.relative_to(ROOT / "solver").with_suffix("").parts) for p in SOURCES
                 if p.stem != "__init__")


def test_solver_sources_do_not_import_blender():
    offenders = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else []
            else:
                continue
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert len(MODULES) >= 10
    assert offenders == []


@pytest.mark.slow
def test_importing_every_solver_module_leaves_bpy_unloaded():
    code = ("import importlib, sys\n"
            f"for m in {MODULES!r}:\n"
            "    importlib.import_module('solver.' + m)\n"
            "bad = sorted({'bpy', 'mathutils', 'bmesh'} & set(sys.modules))\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
