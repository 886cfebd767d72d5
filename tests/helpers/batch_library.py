"""A small motion library for the `signsim batch` tests: short, distinct clips cut from
the sample BVH files, imported through the CLI; and the check that a batch's output
folder holds only finished clips."""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SAMPLES = ROOT / "sample_blends"
LAUNCHER = [sys.executable, str(ROOT / "tools" / "launch.py")]
RIG = str(SAMPLES / "signer.blend")


def short_clip(src, dst, frames):
    """A copy of BVH `src` keeping its first `frames` data rows (a distinct, quick clip)."""
    text = src.read_text().splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("Frame Time:")) + 1
    out = [f"Frames: {frames}" if line.startswith("Frames:") else line for line in text[:start]]
    dst.write_text("\n".join(out + text[start:start + frames]) + "\n")


def make_library(addon, tmp, clips):
    """A library of the short, distinct clips `clips` ((sample name, frames), ...) in the
    new folder `tmp`; its BVH files are in tmp / "clips"."""
    folder = tmp / "clips"
    folder.mkdir()
    for i, (name, n) in enumerate(clips):
        short_clip(SAMPLES / f"{name}.bvh", folder / f"{name}_{i}.bvh", n)
    lib = tmp / "library.blend"
    assert addon.signsim_addon.cli.main(["import", str(folder), "--library", str(lib)]) == 0
    return lib


def only_finished_outputs(out):
    """The files in `out`: each a finished clip's .blend with its .json, nothing else."""
    names = sorted(os.listdir(out))
    blends = {n[:-len(".blend")] for n in names if n.endswith(".blend")}
    assert names == sorted([f"{b}.blend" for b in blends] + [f"{b}.json" for b in blends]), names
    return blends
