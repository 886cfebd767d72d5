"""`./signsim …`: SignSim's CLI handler run through the bpy module (no blender binary).

Same handler as `blender -b -c signsim …` once the extension is installed.
"""
import json
import os
import shutil
import sys

import devenv


def main() -> int:
    # `signsim batch` starts its workers with this same launcher.
    os.environ["SIGNSIM_CLI"] = json.dumps([sys.executable, os.path.abspath(__file__)])
    tmp = devenv.isolate_user_resources("signsim-cli-")
    try:
        import bpy  # noqa: F401  (Blender must load before the add-on is enabled)
        addon = devenv.enable_from_source(tmp)
        return addon.signsim_addon.cli.main(sys.argv[1:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
