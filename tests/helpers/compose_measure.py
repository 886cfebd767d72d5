"""Measuring composed actions the way Blender shows them: world rotations and heads of
every pose bone sampled frame by frame, one-frame turns, and what two clips composed
alone turn a bone at each frame of a seam."""
import pathlib

import bpy
import numpy as np
from mathutils import Matrix

SIGNER = pathlib.Path(__file__).resolve().parent.parent.parent / "sample_blends" / "signer.blend"


def open_signer():
    """Open the bundled sample_blends/signer.blend and return its armature `Signer`."""
    bpy.ops.wm.open_mainfile(filepath=str(SIGNER))
    return bpy.data.objects["Signer"]


def sample(ob, action):
    """World rotations (F, B, 4) (w first) and heads (F, B, 3) m of every pose bone, for
    every frame of an action, as Blender evaluates it; and the bone names."""
    ob.animation_data.action = action
    first, last = (int(round(f)) for f in action.frame_range)
    names = [pb.name for pb in ob.pose.bones]
    rot, heads = [], []
    mw = np.array(ob.matrix_world)
    for f in range(first, last + 1):
        bpy.context.scene.frame_set(f)
        m = np.array([mw @ np.array(pb.matrix) for pb in ob.pose.bones])
        r = m[:, :3, :3] / np.linalg.norm(m[:, :3, :3], axis=1, keepdims=True)
        rot.append([_quat(x) for x in r])
        heads.append(m[:, :3, 3])
    return np.array(rot), np.array(heads), names


def _quat(m):
    q = Matrix(m.tolist()).to_quaternion()
    return [q.w, q.x, q.y, q.z]


def steps_deg(rot):
    """One-frame turn (F−1, B) of world rotations, degrees."""
    d = np.abs(np.sum(rot[1:] * rot[:-1], axis=-1))
    return np.degrees(2 * np.arccos(np.clip(d, 0.0, 1.0)))


def seam_steps(out_rot, a_rot, b_rot, seam, first, near=1):
    """(output turns, clips' turns) (R, B) degrees over the steps of a seam, R = window + 3:
    the steps from the window's frame −2 to its frame `window` (0: its first frame), and what
    the clips composed alone (world rotations a_rot, b_rot of every frame of each) turn
    each bone over the same step within `near` frames: A's (its frames before the part the
    seam cut away, aligned on the window's end) while the output still holds A, B's (from
    its first kept frame) once it holds B; the larger of the two."""
    w, (cut_a, cut_b) = seam["window"], seam["cut"]
    k = int(seam["frame"] - first)
    offsets = np.arange(-2, w + 1)
    out = steps_deg(out_rot[k - 2:k + w + 2])
    a0 = len(a_rot) - cut_a - w
    own = np.zeros_like(out)
    for clip, start, use in ((a_rot, a0, offsets <= w - 1), (b_rot, cut_b, offsets >= -1)):
        st = steps_deg(clip)
        idx = np.clip(start + offsets[:, None] + np.arange(-near, near + 1), 0, len(st) - 1)
        own = np.maximum(own, np.where(use[:, None], st[idx].max(axis=1), 0.0))
    return out, own
