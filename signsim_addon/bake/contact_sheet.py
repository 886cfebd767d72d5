"""Before/after contact sheet of a bake, rendered with Workbench — run in a subprocess.

    python contact_sheet.py BLEND ARMATURE REFERENCE BAKED FRAMES OUT.png   (bpy module)
    blender -b --python contact_sheet.py -- BLEND ARMATURE REFERENCE BAKED FRAMES OUT.png

REFERENCE and BAKED are action names, FRAMES comma-separated scene frames (the caller
picks them; the child needs no SignSim registration).

Rendering is kept out of the calling process: Workbench needs EGL and aborts the whole
process where it is missing. The sheet has two rows
(top: reference, bottom: baked) and SHEET_FRAMES columns at the frames where the
reference penetrates most, each 256×256 px, seen from the front (-Y) of the upper body
and the hands (frame_camera).
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


UPPER_BODY = 0.6    # the top part of the body's height the sheet shows (head to hips)
MARGIN = 1.15       # room around the framed box
LENS_MM, SENSOR_MM = 35.0, 36.0


def _body_points(scene, rig, frames):
    """(N, 3) world positions in metres of the rig's bone heads and tails and the vertices
    of the meshes it deforms (Armature modifier) or carries (children), evaluated at each
    of `frames`."""
    import bpy
    import numpy as np
    meshes = [o for o in scene.objects if o.type == 'MESH' and (
        o.parent == rig or any(m.type == 'ARMATURE' and m.object == rig for m in o.modifiers))]
    points = []
    for frame in frames:
        scene.frame_set(frame)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        for ob in meshes:
            ev = ob.evaluated_get(depsgraph)
            mesh = ev.to_mesh()
            co = np.empty(3 * len(mesh.vertices))
            mesh.vertices.foreach_get("co", co)
            m = np.array(ev.matrix_world)
            points.append(co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3])
            ev.to_mesh_clear()
        mw = np.array(rig.matrix_world)
        bones = np.array([p for b in rig.pose.bones for p in (b.head, b.tail)])
        points.append(bones @ mw[:3, :3].T + mw[:3, 3])
    return np.concatenate(points)


def frame_camera(scene, rig, frames):
    """Add the sheet's camera to `scene`, looking along +Y (Blender's front view) at the
    top UPPER_BODY of the evaluated body at `frames` (world bounding box of the skinned
    meshes, wherever the armature's origin is) together with the hands' bones, with a
    MARGIN; a 35 mm lens on a 36 mm sensor, a square SIZE × SIZE picture. Returns the
    camera object.
    (Blender API: Object.evaluated_get, Object.to_mesh.)"""
    import bpy
    import numpy as np
    from mathutils import Vector

    pts = _body_points(scene, rig, frames)
    top, bottom = pts[:, 2].max(), pts[:, 2].min()
    region = [pts[pts[:, 2] >= top - UPPER_BODY * (top - bottom)]]
    mw = np.array(rig.matrix_world)
    for frame in frames:        # the hands, wherever they reach (below the hips too)
        scene.frame_set(frame)
        hands = [p for b in rig.pose.bones if b.name.lower().startswith(("hand", "f_", "thumb"))
                 or "finger" in b.name.lower() for p in (b.head, b.tail)]
        if hands:
            region.append(np.array(hands) @ mw[:3, :3].T + mw[:3, 3])
    region = np.concatenate(region)
    lo, hi = region.min(axis=0), region.max(axis=0)
    half = MARGIN * max(hi[0] - lo[0], hi[2] - lo[2], 0.1) / 2
    cam_data = bpy.data.cameras.new("SignSimSheet")
    cam_data.lens, cam_data.sensor_width, cam_data.sensor_fit = LENS_MM, SENSOR_MM, 'AUTO'
    cam_data.clip_end = max(100.0, 10 * half)
    cam = bpy.data.objects.new("SignSimSheet", cam_data)
    scene.collection.objects.link(cam)
    # the nearest points (y = lo[1]) fill half the view at this distance; farther ones less
    distance = half * LENS_MM / (SENSOR_MM / 2)
    cam.location = Vector(((lo[0] + hi[0]) / 2, lo[1] - distance, (lo[2] + hi[2]) / 2))
    cam.rotation_euler = Vector((0.0, 1.0, 0.0)).to_track_quat('-Z', 'Y').to_euler()
    scene.camera = cam
    scene.render.resolution_x = scene.render.resolution_y = SIZE     # square: the framing's aspect
    scene.render.resolution_percentage = 100
    scene.render.pixel_aspect_x = scene.render.pixel_aspect_y = 1.0
    bpy.context.view_layer.update()
    return cam


def render_sheet(blend, armature_name, reference_name, baked_name, frames, out_png):
    """Render the sheet of `armature_name` in `blend`: reference row over baked row."""
    import bpy
    import numpy as np

    bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False)
    scene = bpy.context.scene
    rig = bpy.data.objects[armature_name]
    reference, baked = bpy.data.actions[reference_name], bpy.data.actions[baked_name]
    frames = [int(f) for f in frames.split(",")]

    scene.render.engine = 'BLENDER_WORKBENCH'
    scene.render.image_settings.file_format = 'PNG'
    scene.display.shading.light = 'STUDIO'
    scene.display.shading.color_type = 'OBJECT'
    frame_camera(scene, rig, frames)

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
