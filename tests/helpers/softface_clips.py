"""Short soft-face inputs for the bake tests: a window of a sample BVH clip, and
`signsim bake --json` run in-process with its output captured."""
import contextlib
import io
import json
import pathlib

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "sample_blends"
# chin_cheek's index-on-the-right-cheek press (its BVH rows 45..74, the press about frames
# 6..18 of the 30): the soft face simulates every frame, so the tests bake this window, not
# the 91-frame clip (tests/softface/test_softface_api.py dents the signer over the whole clip)
CHEEK = (45, 75)


def window(src, dst, first, last):
    """A copy of BVH `src` keeping its data rows first..last-1."""
    text = src.read_text().splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("Frame Time:")) + 1
    out = [f"Frames: {last - first}" if line.startswith("Frames:") else line for line in text[:start]]
    dst.write_text("\n".join(out + text[start + first:start + last]) + "\n")


def bake_json(cli, rig, out, *extra):
    """`bake --blend rig --armature Signer --out out --json *extra` through `cli`: (exit code,
    the JSON result or None, stderr)."""
    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        code = cli.main(["bake", "--blend", str(rig), "--armature", "Signer", "--out", str(out), "--json", *extra])
    lines = buf.getvalue().strip().splitlines()
    return code, (json.loads(lines[-1]) if lines else None), err.getvalue()
