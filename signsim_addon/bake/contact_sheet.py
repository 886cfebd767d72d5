"""Before/after contact sheet of a bake, rendered with Workbench — run in a subprocess.

    python contact_sheet.py BLEND ARMATURE REFERENCE BAKED FRAMES OUT.png   (bpy module)
    blender -b --python contact_sheet.py -- BLEND ARMATURE REFERENCE BAKED FRAMES OUT.png

REFERENCE and BAKED are action names, FRAMES comma-separated scene frames (the caller
picks them; the child needs no SignSim registration).

Rendering is kept out of the calling process: Workbench needs EGL and aborts the whole
process where it is missing. The sheet has two rows
(top: reference, bottom: baked) and SHEET_FRAMES columns at the frames where the
reference penetrates most, each 256×256 px, seen from the front of the hands.
"""
import os
import sys
import tempfile

SHEET_FRAMES = 4
SIZE = 256


def pick_frames(per_frame_penetration_mm, first_frame, count=SHEET_FRAMES):
    """The `count` scene frames where the reference penetrates most, in time order."""
    order = sorted(range(len(per_frame_penetration_mm)), key=lambda i: -per_frame_penetration_mm[i])
    return sorted(first_frame + i for i in order[:count])


def render_sheet(blend, armature_name, reference_name, baked_name, frames, out_png):
    """Render the sheet of `armature_name` in `blend`: reference row over baked row."""
    import bpy
    import numpy as np
    from mathutils import Vector

    bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False)
    scene = bpy.context.scene
    rig = bpy.data.objects[armature_name]
    reference, baked = bpy.data.actions[reference_name], bpy.data.actions[baked_name]
    frames = [int(f) for f in frames.split(",")]

    scene.render.engine = 'BLENDER_WORKBENCH'
    scene.render.resolution_x = scene.render.resolution_y = SIZE
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = 'PNG'
    scene.display.shading.light = 'STUDIO'
    scene.display.shading.color_type = 'OBJECT'
    # Frame the hands (every hand and finger bone at the sheet's frames) from the front
    # (-Y, Blender's front view), far enough for the 36 mm sensor behind a 35 mm lens.
    points = []
    for frame in frames:
        scene.frame_set(frame)
        points += [rig.matrix_world @ p for b in rig.pose.bones
                   if b.name.lower().startswith(("hand", "f_", "thumb")) or "finger" in b.name.lower()
                   for p in (b.head, b.tail)]
    if not points:
        points = [rig.matrix_world @ b.head for b in rig.pose.bones]
    pts = np.array(points)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    extent = max(hi[0] - lo[0], hi[2] - lo[2], 0.1)
    cam_data = bpy.data.cameras.new("SignSimSheet")
    cam_data.lens = 35.0
    cam = bpy.data.objects.new("SignSimSheet", cam_data)
    scene.collection.objects.link(cam)
    cam.location = Vector(((lo[0] + hi[0]) / 2, lo[1] - 1.25 * extent * 35.0 / 36.0, (lo[2] + hi[2]) / 2))
    cam.rotation_euler = Vector((0.0, 1.0, 0.0)).to_track_quat('-Z', 'Y').to_euler()
    scene.camera = cam

    tiles = []
    with tempfile.TemporaryDirectory() as tmp:
        for row, action in enumerate((reference, baked)):
            slot = rig.animation_data.action_slot.identifier
            rig.animation_data.action = action
            if rig.animation_data.action_slot is None:
                rig.animation_data.action_slot = action.slots[slot]
            for col, frame in enumerate(frames):
                scene.frame_set(frame)
                scene.render.filepath = os.path.join(tmp, f"{row}_{col}.png")
                bpy.ops.render.render(write_still=True)
                img = bpy.data.images.load(scene.render.filepath)
                px = np.empty(SIZE * SIZE * 4, dtype=np.float32)
                img.pixels.foreach_get(px)
                tiles.append(px.reshape(SIZE, SIZE, 4))
                bpy.data.images.remove(img)
    # Blender images store rows bottom-up: stack the baked row first so it lands below.
    rows = [np.concatenate(tiles[r * len(frames):(r + 1) * len(frames)], axis=1) for r in (1, 0)]
    sheet = np.concatenate(rows, axis=0)
    out = bpy.data.images.new("SignSimSheet", sheet.shape[1], sheet.shape[0], alpha=True)
    out.pixels.foreach_set(sheet.ravel())
    out.filepath_raw = out_png
    out.file_format = 'PNG'
    out.save()
    return frames


if __name__ == "__main__":
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    if len(argv) != 6:
        sys.exit("usage: contact_sheet.py BLEND ARMATURE REFERENCE BAKED FRAMES OUT.png")
    if "bpy" not in sys.modules:  # run through the bpy module: keep Blender out of ~
        os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="signsim-sheet-"))
    render_sheet(*argv)
