"""Load SignSim from this source tree into the `bpy` module, as Blender would load it.

Used by the `./signsim` launcher and the Blender test tier, so both run exactly the code
a user installs. The repository root *is* the extension's source folder; it is exposed to
Blender as a local extension repository (a temp folder of symlinks to the source), so
the add-on imports as `bl_ext.signsim_dev.signsim` with its relative imports intact.
"""
import os
import pathlib
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
REPO_MODULE = "signsim_dev"
ADDON_MODULE = f"bl_ext.{REPO_MODULE}.signsim"


def isolate_user_resources(prefix: str = "signsim-") -> pathlib.Path:
    """Point Blender's user folders at a fresh temp folder; call before the first `import bpy`.

    Without this, Blender writes preferences, extension caches and shader caches into the
    home folder. Returns the temp folder.
    """
    if "bpy" in sys.modules:
        raise RuntimeError("isolate_user_resources() must run before the first 'import bpy'")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["BLENDER_USER_RESOURCES"] = str(tmp / "user")
    os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
    return tmp


def enable_from_source(tmp: pathlib.Path):
    """Register the source tree as a local extension repository and enable SignSim.

    Returns the enabled add-on module (`bl_ext.signsim_dev.signsim`).
    Raises RuntimeError when Blender refuses to enable it.
    """
    import addon_utils
    import bpy

    repo_dir = tmp / "extensions"
    package = repo_dir / "signsim"
    if not package.exists():
        _link_package(package)
    repos = bpy.context.preferences.extensions.repos
    if REPO_MODULE not in {r.module for r in repos}:
        repos.new(name=REPO_MODULE, module=REPO_MODULE, custom_directory=str(repo_dir), source='USER')
    mod = addon_utils.enable(ADDON_MODULE, default_set=True, handle_error=_raise)
    if mod is None:
        raise RuntimeError(f"Blender could not enable {ADDON_MODULE}")
    return mod


def _link_package(package):
    """The source tree as an extension folder: a symlink per entry, and a manifest without
    the `wheels` list — the virtualenv already has them, and Blender would otherwise unpack
    ~110 MB of scipy into the temporary user folder on every run."""
    package.mkdir(parents=True)
    for entry in ROOT.iterdir():
        if entry.name not in {"blender_manifest.toml", "wheels", ".git", ".venv"}:
            (package / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    manifest = (ROOT / "blender_manifest.toml").read_text(encoding="utf-8")
    manifest = re.sub(r"^wheels = \[.*?\]\n", "", manifest, flags=re.S | re.M)
    (package / "blender_manifest.toml").write_text(manifest, encoding="utf-8")


def _raise(ex):
    raise ex
