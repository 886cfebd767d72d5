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
