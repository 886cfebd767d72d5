"""The extension as Blender sees it: build, validate, install, register, unregister."""
import json
import os
import pathlib
import re
import subprocess
import sys
import tomllib
import zipfile

import addon_utils
import bpy
import pytest

import build

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
ADDON_MODULE = "bl_ext.signsim_dev.signsim"
POINTER_TYPES = (bpy.types.Scene, bpy.types.Object, bpy.types.Action)

PLATFORMS = ("linux_x64", "windows_x64", "macos_arm64", "macos_x64")

# Runs in a fresh Python: install the zip, bake the demo with it, inspect, uninstall,
# inspect again. numba and llvmlite may only come from the wheels the extension installed
# (the virtualenv has them too), so the bake proves the shipped wheels work.
INSTALL_SCRIPT = r"""
import contextlib, glob, importlib, importlib.machinery, io, json, os, sys
sys.path.insert(0, sys.argv[2])
import devenv
tmp = devenv.isolate_user_resources()
ext_lib = os.path.join(os.environ["BLENDER_USER_RESOURCES"], "extensions", ".local", "lib")

class FromExtensionOnly:
    def find_spec(self, name, path=None, target=None):
        if name not in ("numba", "llvmlite"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, glob.glob(os.path.join(ext_lib, "*", "site-packages")))
        if spec is None:
            raise ModuleNotFoundError(name + " was not installed by the extension")
        return spec
sys.meta_path.insert(0, FromExtensionOnly())
import bpy
def state():
    return {
        "addon_enabled": "bl_ext.user_default.signsim" in bpy.context.preferences.addons,
        "operators": sorted(n for n in dir(bpy.ops.signsim)),
        "classes": sorted(n for n in dir(bpy.types) if n.startswith("SIGNSIM_") or n.startswith("SignSim")),
        "pointers": [hasattr(t, "signsim") for t in (bpy.types.Scene, bpy.types.Object, bpy.types.Action)],
    }
out = {}
out["install"] = list(bpy.ops.extensions.package_install_files(
    filepath=sys.argv[1], repo="user_default", enable_on_install=True))
out["installed"] = state()
out["wheels_installed"] = sorted(d for _r, dirs, _f in os.walk(ext_lib) for d in dirs
                                 if d in ("scipy", "numba", "llvmlite"))
cli = importlib.import_module("bl_ext.user_default.signsim.signsim_addon.cli")
log = io.StringIO()
with contextlib.redirect_stdout(log):
    out["demo_exit"] = cli.main(["demo", "--out", os.path.join(str(tmp), "demo")])
out["demo_log"] = log.getvalue()
with open(os.path.join(str(tmp), "demo", "fingerspelling_metrics.json")) as f:
    out["metrics"] = json.load(f)
out["numba_file"] = sys.modules["numba"].__file__
out["ext_lib"] = ext_lib
cache = bpy.utils.extension_path_user("bl_ext.user_default.signsim", path="solver-cache")
out["cache_files"] = sum(len(f) for _r, _d, f in os.walk(cache))
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
def built_zips(tmp_path_factory):
    """{platform: zip path}: the zips in the folder $SIGNSIM_BUILT_ZIPS when set (`make test`
    builds them once with `make build` and runs the suite on each Blender version against
    them), else built here by `make build`'s script."""
    prebuilt = os.environ.get("SIGNSIM_BUILT_ZIPS")
    if prebuilt:
        version = tomllib.loads((ROOT / "blender_manifest.toml").read_text())["version"]
        paths = [pathlib.Path(prebuilt) / f"signsim-{version}-{p}.zip" for p in PLATFORMS]
        assert all(p.is_file() for p in paths), f"{prebuilt} lacks a zip of this version: run `make build`"
        return dict(zip(PLATFORMS, paths))
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "build.py"), "--output-dir", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    paths = [pathlib.Path(line) for line in proc.stdout.strip().splitlines()[-len(PLATFORMS):]]
    assert [p.name.rsplit("-", 1)[1] for p in paths] == [f"{p}.zip" for p in PLATFORMS]
    return dict(zip(PLATFORMS, paths))


@pytest.mark.slow
def test_each_platform_zip_holds_only_what_the_extension_needs(built_zips):
    tags = {"linux_x64": ("manylinux", "x86_64"), "windows_x64": ("win_amd64",), "macos_arm64": ("macosx", "arm64"),
            "macos_x64": ("macosx", "x86_64")}
    for platform, path in built_zips.items():
        names = zipfile.ZipFile(path).namelist()
        assert "blender_manifest.toml" in names and "__init__.py" in names
        assert any(n.startswith("solver/") for n in names)
        wheels = [n for n in names if n.startswith("wheels/")]
        # One scipy, numba and llvmlite wheel each, all of this platform, plus the pure-Python one.
        for dist in ("scipy", "numba", "llvmlite"):
            mine = [n for n in wheels if n.startswith(f"wheels/{dist}-")]
            assert len(mine) == 1 and all(t in mine[0] for t in tags[platform]), (platform, mine)
        assert any(n.startswith("wheels/threadpoolctl-") for n in wheels)
        assert len(wheels) == 4, (platform, wheels)
        for dev_only in ("tests/", "tools/", "bench/", ".venv/", ".git/", "Makefile", "requirements-dev.txt"):
            assert not any(n.startswith(dev_only) for n in names), dev_only
        assert not any("__pycache__" in n for n in names)
        # the README's links to the manual work in the installed extension
        readme = zipfile.ZipFile(path).read("README.md").decode()
        linked = set(re.findall(r"\]\((docs/[^)#]+)", readme))
        assert linked and linked <= set(names), sorted(linked - set(names))


@pytest.mark.compat
@pytest.mark.slow
def test_each_platform_zip_validates_with_this_blender(built_zips):
    # this Blender's own validator, whichever Blender built the zip
    script = build.blender_ext_script()
    assert script.parts[-6] == f"{bpy.app.version[0]}.{bpy.app.version[1]}", script
    for platform, path in built_zips.items():
        proc = subprocess.run([sys.executable, str(script), "validate", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, (platform, proc.stdout[-2000:], proc.stderr[-2000:])
        manifest = tomllib.loads(zipfile.ZipFile(path).read("blender_manifest.toml").decode())
        assert tuple(map(int, manifest["blender_version_min"].split("."))) <= bpy.app.version, platform


@pytest.mark.compat
@pytest.mark.slow
def test_linux_zip_installs_bakes_and_uninstalls_cleanly(built_zips):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    proc = subprocess.run([sys.executable, "-c", INSTALL_SCRIPT, str(built_zips["linux_x64"]), str(ROOT / "tools")],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["install"] == ["FINISHED"] and out["uninstall"] == ["FINISHED"]
    assert out["installed"]["addon_enabled"]
    assert "append_sample" in out["installed"]["operators"]
    assert out["installed"]["pointers"] == [True, True, True]
    assert out["wheels_installed"] == ["llvmlite", "numba", "scipy"]
    # The bake ran on the shipped numba, compiled once into the extension's user folder.
    assert out["demo_exit"] == 0, out["demo_log"][-2000:]
    assert out["numba_file"].startswith(out["ext_lib"])
    assert "compiled the solver (once after install" in out["demo_log"]
    assert out["cache_files"] > 0
    metrics = out["metrics"]
    assert metrics["baked"]["penetration_max_mm"] < metrics["reference"]["penetration_max_mm"]
    assert out["uninstalled"] == {"addon_enabled": False, "operators": [], "classes": [],
                                  "pointers": [False, False, False]}


@pytest.mark.compat
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


# Opens a .blend in a fresh Python and prints the Blender version that saved it.
OPEN_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[2])
import devenv
devenv.isolate_user_resources()
import bpy
bpy.ops.wm.open_mainfile(filepath=sys.argv[1], load_ui=False)
print("saved by", *bpy.data.version)
"""


@pytest.mark.compat
def test_bundled_signer_blend_opens_cleanly_in_every_supported_blender():
    # Saved by the oldest supported Blender: that one reads a newer file only with "written
    # by newer Blender binary" and leaks memory (4.5 opening a 5.0 file), newer ones upgrade
    # an older file silently. This run's Blender must print no warning or error either.
    proc = subprocess.run([sys.executable, "-c", OPEN_SCRIPT, str(ROOT / "sample_blends" / "signer.blend"),
                           str(ROOT / "tools")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = (proc.stdout + proc.stderr).splitlines()
    assert not [line for line in lines if any(w in line for w in ("Warning", "Error", "newer", "Not freed"))], lines
    saved = next(tuple(map(int, line.split()[2:])) for line in lines if line.startswith("saved by "))
    oldest = tomllib.loads((ROOT / "blender_manifest.toml").read_text())["blender_version_min"]
    assert saved[:2] == tuple(map(int, oldest.split(".")))[:2], (saved, oldest)
