"""`./signsim …`: SignSim's CLI handler run through the bpy module (no blender binary).

Same handler as `blender -b -c signsim …` once the extension is installed.
"""
import json
import os
import pathlib
import shutil
import sys

import devenv


def main() -> int:
    # `signsim batch` starts its workers with this same launcher.
    os.environ["SIGNSIM_CLI"] = json.dumps([sys.executable, os.path.abspath(__file__)])
    os.environ["SIGNSIM_LAUNCHER_PID"] = str(os.getpid())  # the command's 'startup' stage counts from this process's start
    tmp = devenv.isolate_user_resources("signsim-cli-")
    try:
        import bpy  # noqa: F401  (Blender must load before the add-on is enabled)
        addon = devenv.enable_from_source(tmp)
        _keep_extension_user_folder()
        return addon.signsim_addon.cli.main(sys.argv[1:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _keep_extension_user_folder():
    """The extension's user folder (the bake's cached body distance fields) made a link
    to one inside this virtualenv, so that it outlives the run's temporary Blender user
    folders: each CLI run would otherwise build every rig's fields again (seconds of CPU)."""
    import bpy
    folder = pathlib.Path(bpy.utils.extension_path_user(devenv.ADDON_MODULE, create=True))
    kept = pathlib.Path(sys.prefix) / "signsim-extension-user"
    kept.mkdir(exist_ok=True)
    if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
        folder.rmdir()
        folder.symlink_to(kept, target_is_directory=True)


if __name__ == "__main__":
    sys.exit(main())
