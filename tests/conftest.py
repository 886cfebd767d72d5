"""Shared by every test folder.

tests/solver/ is plain pytest (numpy/scipy only). Every other folder uses the real `bpy`
module with SignSim enabled from the source tree: Blender's user folders are isolated
before the first `import bpy` (done when the first such test file is collected, so the
solver tier alone never loads Blender), and every test there starts from a fresh empty
file (`read_homefile(use_empty=True)` keeps enabled add-ons).
"""
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
SOLVER_TESTS = TESTS / "solver"
SAMPLES = ROOT / "sample_blends"
SHARED_DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))                      # the solver as a plain package
sys.path.insert(0, str(TESTS / "helpers"))         # --import-mode=importlib: test helpers
sys.path.insert(0, str(ROOT / "tools"))
# ./signsim run by a test uses this run's Python, so the suite on .venv45 tests Blender 4.5 throughout
os.environ["SIGNSIM_PYTHON"] = sys.executable
# tests/solver/ would otherwise become the module `solver` under --import-mode=importlib
import solver  # noqa: E402,F401

_addon = None


def _blender():
    """Isolate Blender's user folders, import bpy, enable SignSim; once per run."""
    global _addon
    if _addon is None:
        import devenv
        tmp = devenv.isolate_user_resources("signsim-test-")
        import bpy  # noqa: F401 (first import after the isolation)
        _addon = devenv.enable_from_source(tmp)
    return _addon


def _uses_blender(path):
    return SOLVER_TESTS not in pathlib.Path(path).resolve().parents


def pytest_collection_modifyitems(config, items):
    """Every test of tests/solver/ carries the `solver` marker: `make check` runs that whole
    tier (-m "solver or not slow")."""
    for item in items:
        if not _uses_blender(item.path):
            item.add_marker(pytest.mark.solver)


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".py" and file_path.name.startswith("test_") and _uses_blender(file_path):
        _blender()


@pytest.fixture(autouse=True)
def empty_file(request):
    """A fresh empty .blend for every test outside tests/solver/."""
    if _uses_blender(request.node.path):
        import bpy
        bpy.ops.wm.read_homefile(use_empty=True)
    yield


@pytest.fixture(scope="session")
def addon():
    """The enabled SignSim add-on module (`bl_ext.signsim_dev.signsim`)."""
    return _blender()


@pytest.fixture
def shared_data():
    """../shared/data: real third-party mocap files and characters (never copied here)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"third-party test data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def retargeted(tmp_path_factory, addon):
    """A .blend with the signer and the sample fingerspelling clip retargeted onto it
    (built once per run; tests open it and never save over it)."""
    out = tmp_path_factory.mktemp("retargeted") / "fingerspelling_on_signer.blend"
    code = addon.signsim_addon.cli.main(["retarget", "--clip", str(SAMPLES / "fingerspelling.bvh"),
                                         "--rig", str(SAMPLES / "signer.blend"), "--out", str(out)])
    assert code == 0
    return out


def pytest_sessionfinish(session, exitstatus):
    session.config._signsim_exit = int(exitstatus)


def pytest_unconfigure(config):
    """After pytest's summary: end the process through compat (bpy 4.5 can hang at exit)."""
    if _addon is not None and hasattr(config, "_signsim_exit"):
        _addon.signsim_addon.compat.end_process(config._signsim_exit)
