"""Build one extension zip per platform, dist/signsim-<version>-<platform>.zip, exactly as
`blender --command extension build --split-platforms` does.

1. Download the wheels the manifest lists (scipy, numba and llvmlite for each platform)
   into ./wheels/ with pip, unless already there (they are never committed).
2. Copy the extension's own files — an allow-list, PACKAGE, so nothing else in the tree
   (signsim-demo/ from `make demo`, dist/, editor files) is ever packed — and the wheels
   into a staging folder.
3. Run Blender's own extension builder (bl_pkg/cli/blender_ext.py from the bpy module) on
   that folder with --split-platforms (each zip holds only its platform's wheels), then
   `validate` on every zip.

Usage: .venv/bin/python tools/build.py [--output-dir DIR]. Prints the zip paths last, one
per line (linux-x64, windows-x64, macos-arm64, macos-x64: the manifest's order).
Exits non-zero with one line on stderr on failure.
"""
import argparse
import importlib.util
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
# "scipy-1.17.1-cp311-cp311-win_amd64.whl" -> name, version, python tag, abi, platform tags
WHEEL_RE = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-(?P<py>(cp|py)\d+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")


# What the zip holds, relative to the repository root (folders: every file below them
# except Python caches). The manifest's wheels are added from its `wheels` list.
PACKAGE = (
    "blender_manifest.toml", "__init__.py", "LICENSE", "README.md", "docs",
    "signsim_addon", "solver", "operators", "panels", "presets",
    "sample_blends/README.md", "sample_blends/signer.blend",
    "sample_blends/fingerspelling.bvh", "sample_blends/chin_cheek.bvh",
)


def package_files(root: pathlib.Path) -> list:
    """Relative paths (str, '/' separated, sorted) of the files PACKAGE names under
    `root`. Raises SystemExit when a listed path is missing."""
    out = []
    for rel in PACKAGE:
        path = root / rel
        if path.is_file():
            out.append(rel)
        elif path.is_dir():
            out += [f.relative_to(root).as_posix() for f in path.rglob("*")
                    if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc"]
        else:
            raise SystemExit(f"build: {rel} (listed in PACKAGE) does not exist")
    return sorted(out)


def blender_ext_script() -> pathlib.Path:
    """Path of Blender's extension CLI inside the installed bpy module (not imported)."""
    spec = importlib.util.find_spec("bpy")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("build: the bpy module is not installed in this Python")
    found = sorted(pathlib.Path(spec.submodule_search_locations[0]).glob(
        "*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    if not found:
        raise SystemExit("build: Blender's blender_ext.py was not found in the bpy module")
    return found[-1]


def fetch_wheels(manifest: dict) -> None:
    """Download every wheel listed in the manifest that is not on disk yet."""
    for rel in manifest.get("wheels", []):
        path = (ROOT / rel).resolve()
        if path.exists():
            continue
        m = WHEEL_RE.match(path.name)
        if not m:
            raise SystemExit(f"build: cannot parse wheel file name {path.name}")
        target = []
        if m["plat"] != "any":  # a compiled wheel: ask pip for that platform and ABI
            py = m["py"][2:]
            target = ["--implementation", "cp", "--python-version", f"{py[0]}.{py[1:]}",
                      "--abi", m["abi"], "--platform", m["plat"].split(".")[-1]]
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
             "--no-deps", "--only-binary=:all:", *target, "--dest", str(path.parent),
             f"{m['name']}=={m['version']}"],
            check=True)
        if not path.exists():
            raise SystemExit(f"build: pip did not produce {path.name}")


def build(output_dir: pathlib.Path) -> list:
    """Fetch wheels, build and validate one zip per manifest platform; returns their paths."""
    manifest = tomllib.loads((ROOT / "blender_manifest.toml").read_text(encoding="utf-8"))
    fetch_wheels(manifest)
    output_dir.mkdir(parents=True, exist_ok=True)
    zips = [output_dir / f"{manifest['id']}-{manifest['version']}-{p.replace('-', '_')}.zip"
            for p in manifest["platforms"]]
    script = str(blender_ext_script())
    with tempfile.TemporaryDirectory(prefix="signsim-build-") as stage:
        stage = pathlib.Path(stage)
        for rel in package_files(ROOT) + [pathlib.PurePosixPath(w).as_posix() for w in manifest.get("wheels", [])]:
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, stage / rel)
        subprocess.run([sys.executable, script, "build", "--split-platforms", "--source-dir", str(stage),
                        "--output-dir", str(output_dir)], check=True)
    for zip_path in zips:
        if not zip_path.exists():
            raise SystemExit(f"build: Blender's builder did not produce {zip_path.name}")
        subprocess.run([sys.executable, script, "validate", str(zip_path)], check=True)
    return zips


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=pathlib.Path, default=ROOT / "dist")
    args = parser.parse_args()
    try:
        print(*build(args.output_dir), sep="\n")
    except subprocess.CalledProcessError as ex:
        print(f"build: step failed: {' '.join(map(str, ex.cmd[:3]))} (exit {ex.returncode})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
