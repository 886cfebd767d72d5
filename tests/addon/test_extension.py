"""The extension as Blender sees it: build, validate, install, register, unregister."""
import json
import pathlib
import subprocess
import sys
import zipfile

import addon_utils
import bpy
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
ADDON_MODULE = "bl_ext.signsim_dev.signsim"
POINTER_TYPES = (bpy.types.Scene, bpy.types.Object, bpy.types.Action)
# The zip built once must validate and install on both supported Blender versions: this
# run's bpy and the other virtualenv's (`.venv` has 5.0.1, `.venv45` 4.5 LTS; .ci/run makes both).
OTHER_PYTHON = ROOT / (".venv45" if bpy.app.version >= (5, 0, 0) else ".venv") / "bin" / "python"
PYTHONS = [sys.executable] + [str(OTHER_PYTHON)] * OTHER_PYTHON.exists()

# Runs in a fresh Python: validate and install the zip, inspect, uninstall, inspect again.
INSTALL_SCRIPT = r"""
import json, os, subprocess, sys
sys.path.insert(0, sys.argv[2])
import build, devenv
tmp = devenv.isolate_user_resources()
import bpy
def state():
    return {
        "addon_enabled": "bl_ext.user_default.signsim" in bpy.context.preferences.addons,
        "operators": sorted(n for n in dir(bpy.ops.signsim)),
        "classes": sorted(n for n in dir(bpy.types) if n.startswith("SIGNSIM_") or n.startswith("SignSim")),
        "pointers": [hasattr(t, "signsim") for t in (bpy.types.Scene, bpy.types.Object, bpy.types.Action)],
    }
out = {}
out["validate"] = subprocess.run([sys.executable, str(build.blender_ext_script()), "validate", sys.argv[1]],
                                 capture_output=True).returncode
out["install"] = list(bpy.ops.extensions.package_install_files(
    filepath=sys.argv[1], repo="user_default", enable_on_install=True))
out["installed"] = state()
site = os.path.join(os.environ["BLENDER_USER_RESOURCES"], "extensions", ".local", "lib")
out["scipy_wheel_installed"] = any("scipy" in dirs for _r, dirs, _f in os.walk(site))
repo = bpy.context.preferences.extensions.repos["User Default"]
out["uninstall"] = list(bpy.ops.extensions.package_uninstall(repo_directory=repo.directory, pkg_id="signsim"))
out["uninstalled"] = state()
print(json.dumps(out))
"""


def _registered_state():
    return {
        "classes": sorted(n for n in dir(bpy.types) if n.startswith(("SIGNSIM_", "SignSim"))),
        "pointers": [hasattr(t, "signsim") for t in POINTER_TYPES],
        "enabled": ADDON_MODULE in bpy.context.preferences.addons,
    }


@pytest.fixture(scope="module")
def built_zip(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "build.py"), "--output-dir", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return pathlib.Path(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_zip_holds_only_what_the_extension_needs(built_zip):
    names = zipfile.ZipFile(built_zip).namelist()
    assert "blender_manifest.toml" in names and "__init__.py" in names
    assert any(n.startswith("solver/") for n in names)
    assert sum(n.startswith("wheels/scipy-") for n in names) == 4
    assert any(n.startswith("wheels/threadpoolctl-") for n in names)
    for dev_only in ("tests/", "tools/", "bench/", ".venv/", ".git/", "Makefile", "requirements-dev.txt"):
        assert not any(n.startswith(dev_only) for n in names), dev_only
    assert not any("__pycache__" in n for n in names)


@pytest.mark.slow
@pytest.mark.parametrize("python", PYTHONS)
def test_zip_installs_enables_and_uninstalls_cleanly(built_zip, python):
    proc = subprocess.run([python, "-c", INSTALL_SCRIPT, str(built_zip), str(ROOT / "tools")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(next(line for line in reversed(proc.stdout.splitlines()) if line.startswith("{")))
    assert out["validate"] == 0
    assert out["install"] == ["FINISHED"] and out["uninstall"] == ["FINISHED"]
    assert out["installed"]["addon_enabled"]
    assert "append_sample" in out["installed"]["operators"]
    assert out["installed"]["pointers"] == [True, True, True]
    assert out["scipy_wheel_installed"]
    assert out["uninstalled"] == {"addon_enabled": False, "operators": [], "classes": [],
                                  "pointers": [False, False, False]}


def test_register_unregister_register_leaves_no_residue():
    before = _registered_state()
    assert before["enabled"] and before["pointers"] == [True, True, True]
    assert "SIGNSIM_OT_append_sample" in before["classes"]
    addon_utils.disable(ADDON_MODULE, default_set=True)
    try:
        assert _registered_state() == {"classes": [], "pointers": [False] * 3, "enabled": False}
        assert "append_sample" not in dir(bpy.ops.signsim)
    finally:
        addon_utils.enable(ADDON_MODULE, default_set=True)
    assert _registered_state() == before


def test_every_signsim_operator_has_a_tooltip():
    for name in dir(bpy.ops.signsim):
        rna = getattr(bpy.ops.signsim, name).get_rna_type()
        assert rna.description, name


def test_preferences_give_an_absolute_default_library_path(addon):
    path = addon.signsim_addon.preferences.library_path(bpy.context)
    assert pathlib.Path(path).is_absolute() and path.endswith(".blend")
