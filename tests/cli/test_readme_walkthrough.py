"""The README's walkthrough on your own files, run exactly as written (issue 37): its
code block's commands, with only the paths replaced — the captures folder by two short
sample clips, the character by the CC0 base mesh as a .glb file — in a fresh folder.
Editing the README's commands changes what this test runs."""
import json
import pathlib
import re
import shlex
import subprocess

import pytest
from batch_library import SAMPLES, short_clip

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
HEADING = "### Your own files"


def walkthrough():
    """The commands of the first ```sh block after HEADING in README.md, as argv lists."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text[text.index(HEADING):], re.S).group(1)
    return [shlex.split(line, comments=True) for line in block.splitlines() if shlex.split(line, comments=True)]


@pytest.mark.slow
def test_readme_walkthrough_runs_as_written(shared_data, tmp_path):
    captures = tmp_path / "captures"
    captures.mkdir()
    for name in ("chin_cheek", "fingerspelling"):
        short_clip(SAMPLES / f"{name}.bvh", captures / f"{name}.bvh", 30)
    paths = {"./signsim": str(ROOT / "signsim"), "~/captures": str(captures),
             "Character.glb": str(shared_data / "characters" / "godot_male_base_mesh_cc0.glb")}
    commands = walkthrough()
    assert [c[:2] for c in commands] == [["./signsim", "import"], ["./signsim", "list"], ["./signsim", "retarget"],
                                         ["./signsim", "bake"]]
    assert any(arg.endswith((".glb", ".fbx")) for arg in commands[2]), "retarget onto a character file"
    outputs = {}
    for argv in commands:
        proc = subprocess.run([paths.get(a, a) for a in argv], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, (argv, proc.stderr)
        outputs[argv[1]] = proc.stdout
    # the library lists both clips at their own rate; the retarget kept it
    assert re.search(r"^chin_cheek .* 30 fps", outputs["list"], re.M), outputs["list"]
    # the bake's summary: before/after, a verdict and each stage's time; the metrics file beside it
    summary = outputs["bake"]
    assert re.search(r"^ *reference: tracking", summary, re.M) and re.search(r"^ *baked: tracking", summary, re.M)
    assert re.search(r"^verdict: (ok|check)", summary, re.M), summary
    assert re.search(r"^ *stages: startup [\d.]+ s, reading .* total [\d.]+ s$", summary, re.M), summary
    bake = commands[3]
    metrics = json.loads((tmp_path / bake[bake.index("--metrics") + 1]).read_text())
    assert metrics["verdict"] in ("ok", "check") and metrics["baked"]["tracking_rms_deg"] < 10
    assert (tmp_path / bake[bake.index("--out") + 1]).is_file()
