"""Blender tier: the real `bpy` module with SignSim enabled from the source tree.

Blender's user folders are isolated before the first `import bpy`, and every test starts
from a fresh empty file (`read_homefile(use_empty=True)` keeps enabled add-ons).
"""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import devenv  # noqa: E402

_TMP = devenv.isolate_user_resources("signsim-test-")
import bpy  # noqa: E402

ADDON = devenv.enable_from_source(_TMP)
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def empty_file():
    """A fresh empty .blend for every test."""
    bpy.ops.wm.read_homefile(use_empty=True)
    yield


@pytest.fixture(scope="session")
def addon():
    """The enabled SignSim add-on module (`bl_ext.signsim_dev.signsim`)."""
    return ADDON


@pytest.fixture
def shared_data():
    """../shared/data: real third-party mocap files and characters (never copied here)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"third-party test data not found at {SHARED_DATA}")
    return SHARED_DATA
