"""The bundled sample scene (sample_blends/, made by sample_blends/make_samples.py)."""
import pathlib

import bpy

from ..errors import SignSimError

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "sample_blends"
SIGNER_BLEND = SAMPLES / "signer.blend"


def append_signer(scene) -> list:
    """Append every object of sample_blends/signer.blend into `scene`'s master collection.

    Returns the appended objects (armature `Signer` and its meshes). Raises SignSimError
    when the sample file is missing. Source: bpy.types.BlendDataLibraries.load.
    """
    if not SIGNER_BLEND.is_file():
        raise SignSimError(f"sample scene not found: {SIGNER_BLEND}")
    with bpy.data.libraries.load(str(SIGNER_BLEND), link=False) as (src, dst):
        dst.objects = list(src.objects)
    for ob in dst.objects:
        scene.collection.objects.link(ob)
    return list(dst.objects)


def bvh_summary(path) -> dict:
    """Frames, fps and duration (s) of a BVH file, from its MOTION header."""
    frames = frame_time = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("Frames:"):
                frames = int(line.split(":")[1])
            elif line.startswith("Frame Time:"):
                frame_time = float(line.split(":")[1])
                break
    if not frames or not frame_time:
        raise SignSimError(f"{path}: no MOTION header")
    return {"frames": frames, "fps": 1.0 / frame_time, "duration_s": frames * frame_time}
