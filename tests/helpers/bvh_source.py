"""The source side of contact detection without Blender: a BVH file's joints as the
SourceBody the add-on builds from the imported armature (signsim_addon/retarget/contacts.py
source_body): a bone per joint, its tail at its End Site or its children's mean head;
fingertips at the distal bones' tails, palms from the wrist and finger base heads, the head
frame carried by the head joint's rotation, the scale from the rest shoulders."""
import numpy as np

from solver.mocap import bvh_file
from solver.retarget import bonemap, contact_transfer

SAMPLES = 12   # frames the skeleton analysis looks at (the add-on's transfer.MOTION_SAMPLES)


def _tails(data, heads):
    """Bone tails (..., J, 3) from joint heads (..., J, 3): End Site or children's mean."""
    tails = heads.copy()
    children = {}
    for j, p in enumerate(data.parents):
        if p >= 0:
            children.setdefault(p, []).append(j)
    for j, kids in children.items():
        tails[..., j, :] = heads[..., kids, :].mean(axis=-2)
    return tails


def source_body(path):
    """(contact_transfer.SourceBody of the BVH file at path, its fps)."""
    data = bvh_file.read(str(path))
    mats = bvh_file.joint_matrices(data)
    heads = mats[..., :3, 3]
    rest = bvh_file.rest_positions(data)
    rest_tails = _tails(data, rest)
    tails = _tails(data, heads)
    for j, offset in data.end_sites:
        rest_tails[j] = rest[j] + offset
        tails[:, j] = heads[:, j] + mats[:, j, :3, :3] @ np.asarray(offset, float)
    sampled = heads[np.unique(np.linspace(0, len(heads) - 1, SAMPLES).astype(int))]
    body = bonemap.analyse(bonemap.Skeleton(data.names, data.parents, rest, rest_tails, sampled))
    arms = [body.limbs.get((s, "upper_arm")) for s in bonemap.SIDES]
    scale = np.linalg.norm(rest[arms[0][0]] - rest[arms[1][0]]) / contact_transfer.REFERENCE_SHOULDERS
    an = body.anatomy
    origin, axes = contact_transfer.head_frames(mats, body.head, np.stack([an.left, an.forward, an.up], -1))
    tips, dirs = {}, {}
    for key, bones in body.fingers.items():
        if bones:
            tips[key] = tails[:, bones[-1]]
            d = tails[:, bones[-1]] - heads[:, bones[-1]]
            dirs[key] = d / np.linalg.norm(d, axis=-1, keepdims=True)
    palms = {}
    for side in bonemap.SIDES:
        hand = body.limbs.get((side, "hand"))
        bases = [body.fingers[(side, f)][0] for f in contact_transfer.FINGERS[1:] if body.fingers.get((side, f))]
        if hand and len(bases) >= 2:
            palms[side] = contact_transfer.palm_frames(heads, hand[0], bases, side)
    return contact_transfer.SourceBody(float(scale), origin, axes, tips, dirs, palms), data.fps
