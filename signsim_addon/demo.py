"""`signsim demo`: run the main job on the bundled sample and summarise what it did."""
import bpy

from . import samples


def add_arguments(parser):
    parser.add_argument("--out", metavar="DIR", help="folder for the files the demo writes")


def run(args, say) -> dict:
    bpy.ops.wm.open_mainfile(filepath=str(samples.SIGNER_BLEND), load_ui=False)
    rig = bpy.data.objects["Signer"]
    bones = rig.data.bones
    fingers = sorted(b.name for b in bones if b.name.startswith(("thumb.", "f_")))
    face = bpy.data.objects["SignerFace"].data
    clips = {p.name: samples.bvh_summary(p) for p in sorted(samples.SAMPLES.glob("*.bvh"))}
    say(f"Sample signer: armature '{rig.name}' with {len(bones)} bones, "
        f"{len(fingers)} finger bones, face mesh with {len(face.vertices)} vertices")
    for name, c in clips.items():
        say(f"Sample clip {name}: {c['frames']} frames at {c['fps']:.2f} fps ({c['duration_s']:.2f} s)")
    return {"armature": rig.name, "bones": len(bones), "finger_bones": len(fingers),
            "face_vertices": len(face.vertices), "clips": clips}
