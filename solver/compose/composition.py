"""Composition: splice clips at their best transition points, blend them over the
shortest window that passes every seam check, keep planted feet still and every clip on
one floor, layer additive motion. numpy/scipy only; arrays in, arrays out.

Data of one clip (a `Track`), all sampled at one common frame rate `fps` (frames/s):
  rotations  (F, B, 4)  local bone quaternions, w first. The bones listed in `floor_bones`
                        (the root bones) hold rotations in the floor frame (Z up) instead,
                        so that root alignment can turn them about Z.
  positions  (F, P, 3)  located channels, m. The channels in `floor_positions` are root
                        positions in the floor frame (aligned with the root), the others
                        are local offsets (blended, never aligned).
A `Rig` names the root channels and, for the checks and the feet, the skeleton: parents,
armature-space rest matrices, bone lengths and the legs (thigh, shin, foot, toes).

Splicing A then B over a window of W frames overlaps A's last W frames with B's first W:
  α_k = curve((k + 1) / (W + 1)),  k = 0 … W−1     (α never reaches 0 or 1 inside)
  q = slerp(q_A, q_B′, α_k) per bone, on one hemisphere per bone for the whole window (the
  sign of B′ that agrees with A over most of the window), so no frame inside the window
  can change to the other side when A and B are about 180° apart;
  p = (1 − α_k) p_A + α_k p_B′ for local positions and for the root's height; the root's
  horizontal position blends its steps: p(k) = p(k−1) + (1 − α_k) Δp_A(k) + α_k Δp_B′(k),
  and B′ continues from there, so no root step is longer than the clips' own.
B′ is B aligned: turned about Z so that its heading at its first frame is A's at the window's
first frame and moved there; its height is moved so that its floor (from its own planted
feet) is the composition's floor (the first clip's), so chains neither sink nor rise.
Heading is the facing of the hip line and the feet (`heading`), not the pelvis rotation,
whose roll differs between skeletons. Rigs without legs keep the root-rotation heading and
start B at A's root height (or B's own with keep_height).

Seam checks (`SeamLimits`, `check_seam`), per bone on world (armature-space) rotations:
- velocity jump J_b(k) = ‖ω_b(k) − ω_b(k−1)‖, ω_b(k) the world angular velocity over the
  step k → k+1 (rad/s); limit per bone = median + K·1.4826·MAD of J_b over the clean frames
  of each of the two clips (frames near a one-frame turn larger than FLIP_STEP are not
  clean), the larger of the two, at least JUMP_FLOOR, and at least the clips' own jump at
  that frame. Median and MAD ignore a few flips, where a high percentile would take them
  as the clip's normal motion.
- one-frame step: the angle a bone turns in one frame may not exceed STEP_LIMIT unless the
  clips themselves turn that bone by more at that frame of the seam (within NEAR frames of
  it; then their turn there × (1 + STEP_RATIO)). Frame by frame, not the largest turn
  anywhere in the window, so one fast frame of a clip raises the limit only where it is.
- root: its one-frame step may not exceed the clips' own longest step there (+ 1 mm), and
  the change of its velocity has the bones' robust limit (m/s, at least ROOT_JUMP_FLOOR).
A seam fails on any of them. D = ‖v_A(t_end) − v_B(t_start)‖ (`transition_jump`: the
one-sided local angular velocities of A's last kept frame and B's first, all bones stacked,
rad/s) is reported alongside.

Transition points (`best_transition`): the frame pair of A's end and B's start whose
features (`features`: bone heads relative to the root in the heading frame, local angular
velocities × VELOCITY_TIME, the heading's turn rate) are nearest, found with a KD-tree
(scipy.spatial.cKDTree) over B's candidate frames (as in "Motion graphs", Kovar, Gleicher
& Pighin, SIGGRAPH 2002), within SEARCH_TIME s and SEARCH_FRACTION of each clip. The
velocity part of the feature distance is exactly VELOCITY_TIME · D, and the clip ends are
kept unless a pair is nearer by SEARCH_GAIN of their distance. The window then blends the
matched frames together (A's frames from end on with B's from start on).

Feet (`detect_plants`, `hold_feet`): a foot is planted where its lowest point is within
PLANT_HEIGHT·leg length of the clip's floor and slower than PLANT_SPEED·leg length per
second (solver.core.posing.planted); across a seam each planted run is held at one spot (from
where the foot touches down, in the pose it settles into) by a two-bone IK of thigh and
shin (solver.core.posing.two_bone_ik), blended out at lift-off
(solver.core.posing.plant_weights); a foot the next clip stands out of the hold's reach steps
there, lifted, in as many steps as the leg's reach needs, the two feet taking turns (a
foot lifts only while the other is on the floor); a seam that still lifts both feet higher
than the clips there fails 'plant' ("airborne").
"""

import itertools

import numpy as np
from scipy.spatial import cKDTree

from ..core import kinematics, posing, quat

CURVES = ("linear", "smoothstep", "smootherstep")

K_MAD = 6.0                  # robust limit: median + K_MAD · 1.4826 · MAD
JUMP_FLOOR = 1.0             # rad/s: velocity jumps below this never fail a seam
ROOT_JUMP_FLOOR = 0.2        # m/s: root velocity changes below this never fail a seam
STEP_LIMIT = np.radians(20.0)   # rad: no bone turns more in one frame at a seam (unless the clips do)
STEP_RATIO = 0.2             # a seam may turn a bone this fraction faster than the clips do there
FLIP_STEP = np.radians(90.0)    # rad: a one-frame local turn this large is a flip, not motion
ROOT_STEP_SLACK = 1e-3       # m
NEAR = 1                     # frames: what the clips do at a frame is what they do within this many of it
VELOCITY_TIME = 0.1          # s: the velocity part of a feature distance is this × D
HEADING_WEIGHT = 3.0         # the facing's turn rate counts this many times a bone's velocity
SEARCH_TIME = 1.0            # s: transition points are searched this far into each clip
SEARCH_FRACTION = 0.25       # … and within this fraction of the clip's frames
SEARCH_GAIN = 0.05           # a transition point must match this fraction better than the clip ends
PLANT_HEIGHT = 0.04          # × leg length above the clip's floor
PLANT_SPEED = 0.12           # × leg length per second (horizontal)
PLANT_RAMP = 0.2             # s over which a foot hold comes and goes
HOLD_REACH = 0.25            # × leg length: a plant needing a larger ankle correction is not held
PLANT_GAP = 2                # frames: runs of one foot's plant this close are one plant
SHUFFLE = 3.0                # × PLANT_SPEED: a low foot this slow is still down (held on)
STEP_REACH = 0.6             # × leg length: a foot standing this far from its next spot steps there
STEP_HEIGHT = 0.12           # × leg length: how high such a step lifts the foot
STEP_WAIT = 0.5              # s: a foot in the air as a window ends is waited for this long to land
STEP_STRETCH = 1.5           # a stepping lasts this many windows (while the foot is down there)
STEP_FRAMES = 0.15           # s: the shortest step
MAX_STEPS = 3                # steps a foot may take across one seam
PLANT_MISS = 0.01            # m: a hold whose spot the leg misses by more is not held
SKATE_SLACK = 0.01           # m: a foot may skate this much more inside a window than the clips do
AIR_SLACK = 0.02             # m: a foot higher above the floor is off it; both feet may be this much higher at a seam than in the clips
AIR_AFTER = 1.0              # s after a window (and STEP_STRETCH − 1 windows) in which the seam's steps may still lift both feet
SETTLE_SPEED = 0.05          # × leg length per second: an ankle sinking faster has not settled on the floor
SETTLE_TURN = 0.5            # rad/s: nor has a foot turning faster


class Track:
    """One clip's arrays (see the module docstring): rotations (F, B, 4), positions (F, P, 3)."""

    def __init__(self, rotations, positions=None):
        self.rotations = np.asarray(rotations, dtype=float)
        if self.rotations.ndim != 3 or self.rotations.shape[-1] != 4:
            raise ValueError("rotations must have shape (frames, bones, 4)")
        n = len(self.rotations)
        self.positions = np.zeros((n, 0, 3)) if positions is None else np.asarray(positions, dtype=float)
        if self.positions.ndim != 3 or len(self.positions) != n or self.positions.shape[-1] != 3:
            raise ValueError("positions must have shape (frames, channels, 3) like the rotations")

    def __len__(self):
        return len(self.rotations)

    def slice(self, start, stop):
        return Track(self.rotations[start:stop], self.positions[start:stop])


class Rig:
    """Channels and skeleton of the rig composed on.

    root (bone index) and root_position (its channel index) define the floor position;
    floor_bones (bone indices, root included) hold floor-frame rotations, floor_positions
    (channel indices) floor-frame positions; located: {bone index: channel index} of every
    bone with a position channel (default {root: root_position}).
    parents (B,) (−1 for roots), rest (B, 4, 4) armature-space rest matrices (m), lengths
    (B,) m: the skeleton for world rotations and bone heads (None: each bone's rotation is
    taken as its world rotation, no heads). legs: ((thigh, shin, foot, (toe, …)), …), left
    first; with two legs the hip line (left thigh head − right thigh head) gives the heading.
    keep_height: for rigs without legs, B keeps its own root height. feet_carried: each
    foot bone is its shin's child (False: IK feet, which hold_feet cannot move)."""

    def __init__(self, root=0, root_position=0, floor_bones=None, floor_positions=None, keep_height=False,
                 located=None, parents=None, rest=None, lengths=None, legs=(), feet_carried=True):
        self.root, self.root_position = int(root), int(root_position)
        self.floor_bones = np.asarray([root] if floor_bones is None else floor_bones, dtype=np.intp)
        self.floor_positions = np.asarray([root_position] if floor_positions is None else floor_positions,
                                          dtype=np.intp)
        self.keep_height = bool(keep_height)
        self.feet_carried = bool(feet_carried)     # each leg's foot bone is its shin's child
        self.located = {self.root: self.root_position} if located is None else dict(located)
        self.parents = None if parents is None else np.asarray(parents, dtype=np.intp)
        self.legs = tuple((int(t), int(s), int(f), tuple(int(x) for x in toes)) for t, s, f, toes in legs)
        if self.parents is not None:
            rest = np.asarray(rest, dtype=float)
            self.lengths = np.asarray(lengths, dtype=float)
            rel = np.array([rest[b] if p < 0 else np.linalg.inv(rest[p]) @ rest[b]
                            for b, p in enumerate(self.parents)])
            rel[:, :3, :3] /= np.linalg.norm(rel[:, :3, :3], axis=-2, keepdims=True)
            self.rest_rotation = quat.from_matrix(rel[:, :3, :3])      # parent → bone at rest
            # forward's rest transforms: a root's rotation and position are already in armature space
            self.relative = np.where((self.parents < 0)[:, None, None], np.eye(4), rel)
            self.order = _topological(self.parents)
            self.leg_length = float(np.mean([_leg_length(rest, self.lengths, leg) for leg in self.legs])) \
                if self.legs else 0.0

    @property
    def has_legs(self):
        return self.parents is not None and len(self.legs) == 2


def _topological(parents):
    order, seen = [], set()
    while len(order) < len(parents):
        for b, p in enumerate(parents):
            if b not in seen and (p < 0 or p in seen):
                order.append(b)
                seen.add(b)
    return order


def _leg_length(rest, lengths, leg):
    thigh, shin, foot, _toes = leg
    return float(np.linalg.norm(rest[shin, :3, 3] - rest[thigh, :3, 3])
                 + np.linalg.norm(rest[foot, :3, 3] - rest[shin, :3, 3]))


# ------------------------------------------------------------------------------ weights

def curve(s, kind="smoothstep"):
    """Blend weight α(s) for s (...,) in [0, 1] (clipped): linear, smoothstep, smootherstep."""
    s = np.clip(np.asarray(s, dtype=float), 0.0, 1.0)
    if kind == "linear":
        return s
    if kind == "smoothstep":
        return s * s * (3.0 - 2.0 * s)
    if kind == "smootherstep":
        return s * s * s * (s * (6.0 * s - 15.0) + 10.0)
    raise ValueError(f"unknown blend curve '{kind}' (choose {', '.join(CURVES)})")


def blend_weights(window, kind="smoothstep"):
    """Weights α_k (window,) of B for the frames of a window: curve((k + 1) / (window + 1))."""
    window = int(window)
    if window < 0:
        raise ValueError("a blend window cannot be negative")
    return curve((np.arange(window) + 1.0) / (window + 1.0), kind)


def window_slerp(a, b, t):
    """Spherical interpolation (W, B, 4) from a to b (W, B, 4) at fractions t (W,), with one
    hemisphere per bone for the whole window: a and b are each made continuous over the
    window, and b takes the sign that agrees with a over most of it. Unlike a shortest arc
    chosen frame by frame, the result cannot change sides in the middle of a window."""
    a = quat.make_continuous(a)
    b = quat.make_continuous(b)
    sign = np.where(np.sum(a * b, axis=-1).sum(axis=0) < 0.0, -1.0, 1.0)
    b = b * sign[None, :, None]
    d = np.clip(np.sum(a * b, axis=-1, keepdims=True), -1.0, 1.0)
    theta = np.arccos(d)
    s = np.sin(theta)
    near = s < 1e-9
    safe = np.where(near, 1.0, s)
    t = np.asarray(t, dtype=float)[:, None, None]
    wa = np.where(near, 1.0 - t, np.sin((1.0 - t) * theta) / safe)
    wb = np.where(near, t, np.sin(t * theta) / safe)
    return quat.normalize(wa * a + wb * b)


# -------------------------------------------------------------------------- kinematics

def forward(track, rig):
    """World (armature-space) rotations (F, B, 4) (w ≥ 0) and bone heads (F, B, 3) m of a
    track: kinematics.chain of each bone's local transform (rotation, location channel or
    none) after its rest transform from the parent, so W_b = W_parent · R_rest(parent → b) ·
    R_b and head_b = head_parent + W_parent · (rest offset + R_rest · location_b). Root
    bones' rotations and positions are already in armature space. Without a skeleton in
    rig: the rotations themselves and zero heads."""
    rot = track.rotations
    n, nb = rot.shape[:2]
    if rig.parents is None:
        return rot, np.zeros((n, nb, 3))
    located = np.zeros((n, nb, 3))
    for b, c in rig.located.items():
        located[:, b] = track.positions[:, c]
    local = kinematics.transforms(quat.to_matrix(rot), located)
    world = kinematics.chain(rig.parents, None, local[:, rig.order], order=rig.order, relative=rig.relative)
    return quat.from_matrix(world[..., :3, :3]), world[..., :3, 3]


def _tails(world, heads, rig, bones):
    """Tails (F, k, 3) of bones: head + world Y axis × length."""
    y = quat.rotate(world[:, bones], np.array([0.0, 1.0, 0.0]))
    return heads[:, bones] + y * rig.lengths[bones][None, :, None]


def heading(world, heads, rig):
    """Facing (F,) rad about Z of each frame: the horizontal normal of the hip line (left
    thigh head − right thigh head) × Z, averaged with the horizontal directions of the feet
    (foot head → tail). Rigs without two legs: the root rotation's world yaw
    2 atan2(q_z, q_w). Both turn by exactly φ when the clip is turned about Z by φ."""
    if not rig.has_legs:
        q = world[:, rig.root]
        return 2.0 * np.arctan2(q[:, 3], q[:, 0])
    (lt, _ls, lf, _lo), (rt, _rs, rf, _ro) = rig.legs
    line = heads[:, lt] - heads[:, rt]
    fwd = np.cross(line, [0.0, 0.0, 1.0])[:, :2]
    feet = _tails(world, heads, rig, np.array([lf, rf])) - heads[:, [lf, rf]]
    total = _unit2(fwd) + 0.5 * (_unit2(feet[:, 0, :2]) + _unit2(feet[:, 1, :2]))
    return np.arctan2(total[:, 1], total[:, 0])


def _unit2(v):
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def _wrap(a):
    return np.arctan2(np.sin(a), np.cos(a))


# ---------------------------------------------------------------------------- per clip

class ClipInfo:
    """What the seam checks, the transition search, the alignment and the feet need of one
    (trimmed) clip, in the clip's own frame: world rotations (F, B, 4), heads (F, B, 3) m,
    heading (F,) rad, local angular velocities (F−1, B, 3) rad/s, per-bone world steps
    (F−1, B) rad and velocity jumps (F−2, B) rad/s, per-bone robust jump limits (B,) rad/s,
    root steps (F−1,) m and velocity-change limit (m/s), floor (z m, None without legs) and
    planted (F, legs) bool."""

    def __init__(self, track, fps, rig):
        self.fps = float(fps)
        self.world, self.heads = forward(track, rig)
        self.heading = heading(self.world, self.heads, rig)
        self.steps = quat.angle_between(self.world[1:], self.world[:-1])          # (F−1, B)
        r = track.rotations
        self.velocity = quat.log(quat.mul(quat.conj(r[:-1]), r[1:])) * float(fps)   # (F−1, B, 3) local
        self.jumps = jumps = bone_jumps(self.world, fps)                         # (F−2, B)
        # clean frames, per bone: more than 2 frames away from that bone's own flips (a
        # one-frame turn of its local rotation by more than FLIP_STEP)
        flip = (quat.angle_between(track.rotations[1:], track.rotations[:-1]) > FLIP_STEP).astype(float)
        # np.convolve's "same" is as long as the longer input: cut the full one to the clip
        # (a clip of 4 or 5 frames has fewer steps than the kernel)
        near = np.apply_along_axis(lambda f: np.convolve(f, np.ones(5))[2:2 + len(f)], 0, flip) > 0
        clean = ~(near[:-1] | near[1:])                                          # (F−2, B)
        self.jump_limit = np.maximum(robust_limit(jumps, clean), JUMP_FLOOR)
        p = track.positions[:, rig.root_position] if track.positions.shape[1] else np.zeros((len(track), 3))
        self.root_steps = np.linalg.norm(np.diff(p, axis=0), axis=-1)
        acc = np.linalg.norm(np.diff(p, 2, axis=0), axis=-1) * fps
        self.root_limit = max(float(robust_limit(acc[:, None], clean.all(axis=1)[:, None])[0]),
                              ROOT_JUMP_FLOOR)
        self.floor, self.planted = None, np.zeros((len(track), 0), dtype=bool)
        if rig.has_legs:
            self.floor, self.planted = detect_plants(self.world, self.heads, rig, fps)


def bone_jumps(world, fps):
    """Per-bone velocity jumps J (F−2, B) rad/s of world rotations (F, B, 4): the change of
    world angular velocity ω(k) = log(W(k+1) W(k)⁻¹)·fps between consecutive steps."""
    if len(world) < 3:
        return np.zeros((0, world.shape[1]))
    w = quat.log(quat.mul(world[1:], quat.conj(world[:-1]))) * float(fps)       # (F−1, B, 3)
    return np.linalg.norm(np.diff(w, axis=0), axis=-1)


def robust_limit(values, clean):
    """median + K_MAD · 1.4826 · MAD along axis 0 of values (N, k) over the frames where
    clean (N, k) is True (columns with fewer than 3 clean frames use all): a normal
    sample's median + K_MAD σ, unmoved by a few outliers. Returns (k,); 0 for N = 0."""
    if len(values) == 0:
        return np.zeros(values.shape[1:])
    clean = clean | (clean.sum(axis=0) < 3)
    x = np.where(clean, values, np.nan)
    med = np.nanmedian(x, axis=0)
    mad = np.nanmedian(np.abs(x - med), axis=0)
    return med + K_MAD * 1.4826 * mad


def detect_plants(world, heads, rig, fps):
    """Floor (z m) and planted mask (F, 2) per leg of world rotations (F, B, 4) and heads.

    The lowest point of a foot is the lowest of its head, its toes' heads and tails. The
    floor is first the 5th percentile of both feet's lowest points, then the median lowest
    point over the frames found planted there (solver.core.posing.planted: within
    PLANT_HEIGHT·leg length of the floor, slower than PLANT_SPEED·leg length per second)."""
    low = np.stack([_lowest(world, heads, rig, leg) for leg in rig.legs], axis=1)   # (F, 2, 3)
    length = rig.leg_length
    floor = float(np.percentile(low[..., 2], 5))

    def masks(fl):
        return np.stack([posing.planted(low[:, k], fps, fl, PLANT_SPEED * length, PLANT_HEIGHT * length)
                         for k in range(low.shape[1])], axis=1)
    mask = masks(floor)
    if mask.any():
        floor = float(np.median(low[..., 2][mask]))
        mask = masks(floor - 0.5 * PLANT_HEIGHT * length)      # the floor is the middle of the band
    return floor, mask


def skating(points, fps, floor, leg_length):
    """Horizontal distance (m) a foot travels on the floor faster than a shuffle: its
    points (F, P, 3) m (`_foot_points`), over the steps between two frames where some of
    them lie within PLANT_HEIGHT · leg length of `floor` (z m) at both, the smallest step
    of those points, counted where it exceeds SHUFFLE · PLANT_SPEED · leg length per
    second (a foot moving that fast is swinging, and a swinging foot is off the floor). A
    foot rolling about its heel or ball keeps that point still and does not skate."""
    if len(points) < 2:
        return 0.0
    step = np.linalg.norm(np.diff(points[..., :2], axis=0), axis=-1)                 # (F−1, P)
    near = points[..., 2] <= floor + PLANT_HEIGHT * leg_length
    both = near[1:] & near[:-1]
    least = np.where(both, step, np.inf).min(axis=1)
    on = np.isfinite(least) & (least * fps > SHUFFLE * PLANT_SPEED * leg_length)
    return float(least[on].sum())


def floor_slide(points, floor, leg_length):
    """(slide m, depth m, sunk m) of a foot over some frames, its points (F, P, 3) m
    (`_foot_points`) on a floor at z `floor` m. slide: how far (horizontal) the point of
    the foot that moves least gets from where it is at the first frame, when the foot's
    lowest point stays within PLANT_HEIGHT · leg length of the floor at every frame
    (else 0: the foot leaves the floor, and a lifted foot does not slide); depth: how far
    the lowest point goes below the floor (≥ 0); sunk: the horizontal path (m) of that
    least-moving point over the steps between frames where the foot is below the floor."""
    if not len(points):
        return 0.0, 0.0, 0.0
    reach, depth = own_slide(points, floor)
    low = points[..., 2].min(axis=1)                                                  # (F,)
    slide = reach if np.all(low <= floor + PLANT_HEIGHT * leg_length) else 0.0
    step = np.linalg.norm(np.diff(points[..., :2], axis=0), axis=-1).min(axis=1)      # (F−1,)
    below = low < floor
    return slide, depth, float(step[below[1:] & below[:-1]].sum())


def own_slide(points, floor):
    """(slide m, depth m) of a foot in a clip itself over some frames (points (F, P, 3) m on
    the clip's floor z m): how far its least-moving point gets from where it is at the
    first frame, on the floor or not, and how far it goes below the floor (≥ 0)."""
    if not len(points):
        return 0.0, 0.0
    reach = np.linalg.norm(points[..., :2] - points[:1, :, :2], axis=-1).max(axis=0)
    return float(reach.min()), float(max(floor - points[..., 2].min(), 0.0))


def _foot_points(world, heads, rig, leg):
    """The points (F, P, 3) m of a foot: the heads and tails of its foot and toe bones."""
    _thigh, _shin, foot, toes = leg
    bones = np.array((foot,) + toes)
    return np.concatenate([heads[:, bones], _tails(world, heads, rig, bones)], axis=1)


def airborne(world, heads, rig, floor):
    """(F,) m: how high the lower of the two feet (its lowest point) is above the floor (z
    m) at each frame of world rotations (F, B, 4) and heads (F, B, 3) (both feet in the
    air: the body hops or jumps)."""
    return np.min([_foot_points(world, heads, rig, leg)[..., 2].min(axis=1) for leg in rig.legs], axis=0) - floor


def _air_frames(window, fps):
    """Frames after a seam's window start in which its steps may lift the feet: the window,
    the rest of a stepping (STEP_STRETCH windows) and AIR_AFTER s."""
    return int(window) + 1 + int(np.ceil((STEP_STRETCH - 1.0) * window)) + int(round(AIR_AFTER * fps))


def _lowest(world, heads, rig, leg):
    pts = _foot_points(world, heads, rig, leg)
    return pts[np.arange(len(pts)), np.argmin(pts[..., 2], axis=1)]


# ------------------------------------------------------------------------------ splicing

def align(b, anchor_position, psi, rig, height=None):
    """B′: b's floor channels turned about Z by psi (rad) and moved so that b's root starts
    at anchor_position (3,) m; height: the z offset given to b instead (floor alignment),
    None: b starts at the anchor's height (keep_height: at its own). Returns (Track,
    offset (3,) m), offset the translation applied to b's first root position."""
    qz = np.array([np.cos(psi / 2), 0.0, 0.0, np.sin(psi / 2)])
    rz = quat.to_matrix(qz)
    rot = b.rotations.copy()
    rot[:, rig.floor_bones] = quat.mul(qz, rot[:, rig.floor_bones])
    pos = b.positions.copy()
    p0 = b.positions[0, rig.root_position].copy()
    target = np.array(anchor_position, dtype=float)
    if height is not None:
        target[2] = p0[2] + height
    elif rig.keep_height:
        target[2] = p0[2]
    fp = rig.floor_positions
    pos[:, fp] = (pos[:, fp] - p0) @ rz.T + target
    return Track(rot, pos), target - p0


def _anchor(track, index, rig):
    """Root position (3,) of track at frame index; one past the end extrapolated from the
    last step."""
    p = track.positions[:, rig.root_position]
    if index < len(track):
        return p[index]
    last = len(track) - 1
    step = p[last] - p[last - 1] if last > 0 else np.zeros(3)
    return p[last] + (index - last) * step


def splice(a, b, window, kind="smoothstep", rig=None, psi=None, height=None):
    """A then B′ (B aligned to A, see align) blended over `window` frames: a Track of len(a) +
    len(b) − window frames. psi: heading change (rad) given to B (default: from the root
    rotations' yaw); height: B's z offset (default: see align). Returns (track, info),
    info = {"start": first frame of the window in the result, "window", "heading_rad",
    "offset" (3,) m}. Raises ValueError when the window is longer than either clip."""
    rig = rig or Rig()
    window = int(window)
    if window < 0 or window > min(len(a), len(b)):
        raise ValueError(f"a window of {window} frames does not fit clips of {len(a)} and {len(b)} frames")
    start = len(a) - window
    if psi is None:
        yaw = lambda q: 2.0 * np.arctan2(q[3], q[0])     # noqa: E731
        psi = yaw(a.rotations[min(start, len(a) - 1), rig.root]) - yaw(b.rotations[0, rig.root])
    psi = float(_wrap(psi))
    b2, offset = align(b, _anchor(a, start, rig), psi, rig, height)
    alpha = blend_weights(window, kind)
    rot = np.concatenate([a.rotations, b2.rotations[window:]], axis=0)
    pos = np.concatenate([a.positions, b2.positions[window:]], axis=0)
    if window:
        rot[start:len(a)] = window_slerp(a.rotations[start:], b2.rotations[:window], alpha)
        pos[start:len(a)] = (1.0 - alpha)[:, None, None] * a.positions[start:] \
            + alpha[:, None, None] * b2.positions[:window]
        # root channels: blend the horizontal steps (velocities), so no step is longer than
        # A's or B's own, and B′ continues from where the window ends; heights blend as
        # positions (both clips stand on one floor)
        fp = rig.floor_positions
        steps = (1.0 - alpha[1:, None, None]) * np.diff(a.positions[start:, fp, :2], axis=0) \
            + alpha[1:, None, None] * np.diff(b2.positions[:window, fp, :2], axis=0)
        path = a.positions[start, fp, :2] + np.concatenate([np.zeros((1,) + steps.shape[1:]),
                                                            np.cumsum(steps, axis=0)])
        shift = path[-1] - b2.positions[window - 1, fp, :2]
        pos[start:len(a), fp, :2] = path
        pos[len(a):, fp, :2] = b2.positions[window:, fp, :2] + shift
        offset = offset + np.append(shift[list(fp).index(rig.root_position)], 0.0)
    return Track(rot, pos), {"start": start, "window": window, "heading_rad": psi, "offset": offset}


# ------------------------------------------------------------------------- seam checks

class SeamLimits:
    """Limits of one seam from its two clips' ClipInfo, a window of `window` frames blending
    A's frames end_a … and B's start_b …, per frame of the seam: the frames the checks read
    are the window's frames at offsets r = −2 … max(window, 1) (r = 0: its first frame),
    and what the clips do at offset r is what A does at its frame end_a + r (while the
    output still holds A there, r < window) and B at its frame start_b + r (r ≥ −1), the
    larger of the two (nearest existing frame at a clip's end).
      jump (R, B) rad/s: velocity jump per offset and bone (R = max(window, 1) + 3; offset
                  r at row r + 2): the larger of the two clips' robust limits (or
                  `threshold` rad/s for every bone), and never less than the clips' own
                  jump there;
      step (R, B) rad: one-frame turn over the step from offset r to r + 1: STEP_LIMIT, or
                  the clips' own turn there × (1 + STEP_RATIO);
      own_step (R, B) rad: the clips' own turn there;
      root_jump (m/s) and own_root_step (m): the root's velocity change limit and the clips'
                  longest own root step over the seam.
    Comparing frame by frame, a bone that turns fast once somewhere in a clip (a retarget
    flip, a fast curl) raises the limit at that frame only."""

    def __init__(self, info_a, info_b, end_a, start_b, window, threshold=None):
        offsets = np.arange(-2, max(window, 1) + 1)
        in_b = offsets >= -1

        def own(a, b, shift, a_until):
            # a, b: per-step (or per-frame) values of each clip; row j describes frame
            # j + shift (steps: the step from frame j; jumps: the frame j + 1); A counts up
            # to offset a_until (a jump also reads the frame before it)
            use_a = offsets <= a_until

            def at(values, first, use):
                if not len(values):
                    return np.zeros((len(offsets), a.shape[1]))
                # the frame and its neighbours: a blend may shift a clip's fast frame by one
                idx = first + offsets - shift
                near = values[np.clip(idx[:, None] + np.arange(-NEAR, NEAR + 1), 0, len(values) - 1)].max(axis=1)
                return np.where(use[:, None], near, 0.0)
            return np.maximum(at(a, end_a, use_a), at(b, start_b, in_b))
        robust = np.maximum(info_a.jump_limit, info_b.jump_limit) if threshold is None \
            else np.full(info_a.jump_limit.shape, float(threshold))
        self.jump = np.maximum(robust[None], own(info_a.jumps, info_b.jumps, 1, window))
        self.root_jump = max(info_a.root_limit, info_b.root_limit)
        self.own_step = own(info_a.steps, info_b.steps, 0, window - 1)
        a_lo, b_lo = max(end_a - 2, 0), max(start_b - 1, 0)
        parts = [x for x in (info_a.root_steps[a_lo:end_a + window + 1], info_b.root_steps[b_lo:start_b + window + 2])
                 if len(x)]
        self.own_root_step = float(np.max(np.concatenate(parts))) if parts else 0.0
        self.step = np.maximum(STEP_LIMIT, self.own_step * (1.0 + STEP_RATIO))


def _seam_frames(start, window, n):
    """Interior frame indices whose velocity change touches a window [start, start + window):
    from the frame before it to the frame after it, within 1 … n−2."""
    lo, hi = max(start - 1, 1), min(start + max(window, 1), n - 2)
    return np.arange(lo, hi + 1)


def check_seam(world, root_path, fps, start, window, limits, names=None):
    """Checks of one seam on composed world rotations (F, B, 4) and root path (F, 3) m,
    every frame against the limits at its offset in the seam (SeamLimits).

    Returns {"passed", "failures" (list of str: 'jump', 'step', 'root_step', 'root_jump';
    recheck adds 'plant'),
    "score" (largest ratio to a limit), "max_jump" (rad/s), "max_step_deg", "step_excess_deg"
    (the largest one-frame turn beyond both STEP_LIMIT and what the clips turn that bone at
    that frame; ≤ 0 when no bone does), "root_step_m", "root_jump" (m/s), "worst": up to 3
    {"bone", "jump", "jump_limit" (rad/s, at the frame of its largest jump ratio),
    "step_deg", "step_limit_deg", "own_step_deg" (the clips' own turn there; at the frame of
    its largest step ratio)} by their largest ratio to a limit}."""
    frames = _seam_frames(start, window, len(world))
    lo, hi = frames[0] - 1, frames[-1] + 2
    part = world[lo:hi]
    jumps = bone_jumps(part, fps)                                   # frames lo+1 … hi−2
    steps = quat.angle_between(part[1:], part[:-1])                 # steps from frames lo … hi−2
    rj, rs = lo + 1 - start + 2, lo - start + 2                     # their rows in the limits
    j_lim = limits.jump[rj:rj + len(jumps)]
    s_lim, own = limits.step[rs:rs + len(steps)], limits.own_step[rs:rs + len(steps)]
    p = root_path[lo:hi]
    root_step = float(np.linalg.norm(np.diff(p, axis=0), axis=-1).max())
    root_jump = float(np.linalg.norm(np.diff(p, 2, axis=0), axis=-1).max() * fps) if len(p) > 2 else 0.0
    failures = []
    if np.any(jumps > j_lim):
        failures.append("jump")
    if np.any(steps > s_lim + 1e-9):
        failures.append("step")
    if root_step > limits.own_root_step + ROOT_STEP_SLACK:
        failures.append("root_step")
    if root_jump > limits.root_jump:
        failures.append("root_jump")
    j_ratio, s_ratio = jumps / j_lim, steps / s_lim
    kj, ks = j_ratio.argmax(axis=0), s_ratio.argmax(axis=0)         # per bone: its worst frame
    ratio = np.maximum(j_ratio.max(axis=0), s_ratio.max(axis=0))
    worst = [{"bone": names[b] if names is not None else int(b), "jump": float(jumps[kj[b], b]),
              "jump_limit": float(j_lim[kj[b], b]), "step_deg": float(np.degrees(steps[ks[b], b])),
              "step_limit_deg": float(np.degrees(s_lim[ks[b], b])),
              "own_step_deg": float(np.degrees(own[ks[b], b]))} for b in np.argsort(-ratio)[:3]]
    score = max(float(ratio.max()), root_step / max(limits.own_root_step + ROOT_STEP_SLACK, 1e-9),
                root_jump / limits.root_jump)
    excess = float(np.degrees((steps - np.maximum(STEP_LIMIT, own)).max()))
    return {"passed": not failures, "failures": failures, "score": score, "max_jump": float(jumps.max()),
            "max_step_deg": float(np.degrees(steps.max())), "step_excess_deg": excess, "root_step_m": root_step,
            "root_jump": root_jump, "worst": worst}


def transition_jump(a, end, b, start, fps):
    """D = ‖v_A(t_end) − v_B(t_start)‖ (rad/s, all bones stacked) of joining a's frame end−1
    to b's frame start (local rotations (F, B, 4)): one-sided velocities, v_A over a's step
    end−2 → end−1 and v_B over b's step into `start` (start−1 → start; for start 0, its
    first step 0 → 1), body-frame as in metrics.splice_velocity_jump."""
    def velocity(q, k):
        return quat.log(quat.mul(quat.conj(q[k]), q[k + 1])) * float(fps)
    return float(np.linalg.norm((velocity(a, end - 2) - velocity(b, max(start - 1, 0))).ravel()))


def _alignment(a, index, info_b, start, rig, floor):
    """(psi rad, height m or None) aligning B (its frame `start`) to track a at frame index
    (one past the end: its last frame): the heading difference, and with legs the z offset
    putting B's floor on `floor`."""
    k = min(index, len(a) - 1)
    world, heads = forward(a.slice(k, k + 1), rig)
    psi = float(heading(world, heads, rig)[0] - info_b.heading[start])
    height = None if floor is None or info_b.floor is None else floor - info_b.floor
    return psi, height


def features(info, rig, poses, steps):
    """Pose + velocity features (k, 6B + 1) of a clip: at frames `poses` (k,) the bone heads
    relative to the root head, turned by −heading (m; without a skeleton the rotation
    vectors of the world rotations), and over its steps `steps` (k,) (step j: frame j → j+1)
    the local angular velocities (rad/s, as in D) × VELOCITY_TIME, so that the velocity
    part of a distance is VELOCITY_TIME · D, and the turn rate of the heading (rad/s) ×
    VELOCITY_TIME × HEADING_WEIGHT (a change of facing is seen before any one bone's)."""
    poses, steps = np.asarray(poses, dtype=np.intp), np.asarray(steps, dtype=np.intp)
    if rig.parents is None:
        x = quat.log(quat.make_continuous(info.world))[poses]
    else:
        rel = info.heads[poses] - info.heads[poses, rig.root:rig.root + 1]
        c, s = np.cos(-info.heading[poses])[:, None], np.sin(-info.heading[poses])[:, None]
        x = np.stack([c * rel[..., 0] - s * rel[..., 1], s * rel[..., 0] + c * rel[..., 1], rel[..., 2]], axis=-1)
    v = info.velocity[steps] * VELOCITY_TIME
    turn = _wrap(info.heading[steps + 1] - info.heading[steps])[:, None] * info.fps * VELOCITY_TIME * HEADING_WEIGHT
    return np.concatenate([x.reshape(len(poses), -1), v.reshape(len(poses), -1), turn], axis=1)


def search_frames(n, fps, search=SEARCH_TIME):
    """How many frames of a clip of n frames the transition search may cut (int): search s
    of them, at most SEARCH_FRACTION of the clip."""
    return int(max(0, min(round(search * fps), int(SEARCH_FRACTION * n))))


def best_transition(info_a, info_b, rig, cut_a, cut_b):
    """(end, start, distance, distance at the ends): the pair whose features match best, A's
    state at frame end−1 against B's at frame start−1, so the composition runs A up to frame
    end−1 and B on from frame start. end in [len(A) − cut_a, len(A)], start in [0, cut_b]
    (cKDTree over B's frames; distances in feature units, see `features`). The clip ends
    (len(A), 0) are kept unless another pair is nearer by more than SEARCH_GAIN of their
    distance, so the chosen point is never worse than the ends on this distance, and
    frames are not cut for a gain too small to see."""
    n_a = len(info_a.world)
    ends = np.arange(max(n_a - cut_a, 2), n_a + 1)
    starts = np.arange(0, cut_b + 1)
    # poses at A's frame end−1 and B's frame start−1 (B's frame 0 for start 0), velocities
    # over the steps D compares (A's step into end−1, B's step into start; B's first step
    # for start 0), so the velocity part of a distance is exactly VELOCITY_TIME · D
    fa = features(info_a, rig, ends - 1, ends - 2)
    fb = features(info_b, rig, np.maximum(starts - 1, 0), np.maximum(starts - 1, 0))
    dist, idx = cKDTree(fb).query(fa)
    at_ends = float(np.linalg.norm(fa[-1] - fb[0]))
    k = int(np.argmin(dist))
    if not dist[k] < (1.0 - SEARCH_GAIN) * at_ends:
        return n_a, 0, at_ends, at_ends
    return int(ends[k]), int(starts[idx[k]]), float(dist[k]), at_ends


# ------------------------------------------------------------------------------ compose

def compose(tracks, fps, windows=None, kinds="smoothstep", rig=None, threshold=None, max_window=None,
            search=SEARCH_TIME, names=None, infos=None, keep=None):
    """Splice tracks in order into one Track, each seam at its best transition point and
    with its window, then checked.

    windows: one int per seam (len(tracks) − 1), None entries (or windows None) taking the
    shortest window that passes every check (up to max_window frames and half of either
    clip; when none does at the transition point, at the clip ends; when none does there
    either, the one closest to passing); kinds: one curve
    name, or one per seam; threshold: rad/s for every bone's velocity jump instead of the
    clips' own limits; search: seconds of each clip end the transition search may cut (0:
    blend at the clips' ends). names: bone names for the report; infos: the tracks'
    ClipInfo when already computed; keep: per track None or (first, last), its frames
    (indices) that no seam may cut or blend (a contact's: a seam's transition search and
    window stay out of them, down to a hard cut at their edge).
    Returns (track, seams, planted): seams a list of dicts per seam {"index" (1-based),
    "start" (first frame of the window in the result), "window", "suggested", "found" (a
    window passing every check exists), "curve", "cut" (A frames, B frames cut away),
    "transition" (end, start: the matched frames), "heading_deg", "root_offset_m", "D"
    (rad/s, at the chosen points), "match"/"match_ends" (best_transition's distances, None
    without a search), "step_excess_deg", "D_ends" (rad/s,
    at the clip ends), "passed", "flagged", "failures", "worst", "max_jump", "max_step_deg",
    "root_step_m", "root_jump", "limits" (its SeamLimits, for recheck)}; planted (F, legs)
    bool or None (no legs): the clips' planted flags on the output frames, inside a window
    where either clip has the foot planted.
    Raises ValueError for clips shorter than 3 frames and windows that do not fit."""
    if not tracks:
        raise ValueError("nothing to compose")
    rig = rig or Rig()
    n_seams = len(tracks) - 1
    windows = [None] * n_seams if windows is None else list(windows)
    kinds = [kinds] * n_seams if isinstance(kinds, str) else list(kinds)
    if len(windows) != n_seams or len(kinds) != n_seams:
        raise ValueError(f"{len(tracks)} clips have {n_seams} seams: give one window and curve per seam")
    short = [i for i, t in enumerate(tracks) if len(t) < 3]
    if short:
        raise ValueError(f"clip {short[0] + 1} has {len(tracks[short[0]])} frame(s); composing needs at least 3")
    infos = [ClipInfo(t, fps, rig) for t in tracks] if infos is None else infos
    keep = [None] * len(tracks) if keep is None else list(keep)
    floor = infos[0].floor
    out = tracks[0]
    planted = infos[0].planted.copy() if rig.has_legs else None
    free = len(out)          # frames at the end of `out` that no earlier window blended
    seams = []
    for i, (b, w, kind) in enumerate(zip(tracks[1:], windows, kinds), start=1):
        ia, ib = infos[i - 1], infos[i]
        n_prev = len(tracks[i - 1])
        # A's frames from a_from on and B's before b_until are free to cut and blend
        a_from = 0 if keep[i - 1] is None else keep[i - 1][1] + 1
        b_until = len(b) if keep[i] is None else keep[i][0]
        cut_a = min(search_frames(n_prev, fps, search), free - 2, n_prev - a_from)
        cut_b = min(search_frames(len(b), fps, search), b_until)
        # the previous clip's frames in `out` end at its own frame n_prev − 1
        candidates = [(n_prev, 0)]
        match = match_ends = None
        if cut_a > 0 or cut_b > 0:
            end, start, match, match_ends = best_transition(ia, ib, rig, max(cut_a, 0), cut_b)
            candidates.insert(0, (end, start))
        plans = []
        for end, start in dict.fromkeys(candidates):          # the transition point first
            plan = _SeamPlan(out, free, n_prev, b, ia, ib, end, start, kind, rig, fps, threshold, floor, names,
                             max_window, a_from, b_until)
            plans.append(plan)
            if plan.found if w is None else int(w) in plan.fits:
                break
        if w is not None and int(w) not in plans[-1].fits:
            raise ValueError(f"seam {i}: a window of {w} frames reaches into the previous seam, a contact's "
                             f"frames or past the clip ({plans[-1].fits[-1] if plans[-1].fits else 0} frames "
                             f"available)")
        # an explicit window: at the transition point where it fits there, else at the clip
        # ends; else the first plan with a passing window (the clip ends when the transition
        # point has none), else the transition point
        plan = plans[-1] if w is not None else next((p for p in plans if p.found), plans[0])
        w = plan.suggested if w is None else int(w)
        end, start, suggested, found = plan.end, plan.start, plan.suggested, plan.found
        d_ends = transition_jump(tracks[i - 1].rotations, n_prev, b.rotations, 0, fps)
        d = transition_jump(tracks[i - 1].rotations, end, b.rotations, start, fps)
        a0, b0 = plan.frames(w)
        b_cut = plan.b_cut(w)
        res, inf, chk, a_len, lim = plan.attempt(w, full=True)
        s0 = inf["start"]
        if planted is not None:
            # inside a window a foot is planted where it is in either clip: a plant that
            # runs from A into B stays one plant (held at one spot), not pieces between
            # which the blend slides the foot
            either = planted[s0:a_len] | ib.planted[b0:b0 + w]
            planted = np.concatenate([planted[:s0], either, ib.planted[b0 + w:]], axis=0)
        out = res
        free = len(b_cut) - w
        rep = {"index": i, "start": int(s0), "window": int(w), "suggested": int(suggested), "found": bool(found),
               "curve": kind, "cut": [int(n_prev - (a0 + w)), int(b0)], "transition": [int(end), int(start)],
               "heading_deg": float(np.degrees(inf["heading_rad"])),
               "root_offset_m": float(np.linalg.norm(np.asarray(inf["offset"])[:2])),
               "D": d, "D_ends": d_ends, "match": match if plan is plans[0] and match is not None else match_ends,
               "match_ends": match_ends, "flagged": not chk["passed"], "limits": lim}
        if rig.has_legs:  # what the clips themselves skate over the frames the window blends
            parts = [(info, slice(f0, f0 + w + 1)) for info, f0 in ((ia, a0), (ib, b0))]
            rep["own_skate_m"] = [max(skating(_foot_points(info.world[p], info.heads[p], rig, leg), fps, info.floor,
                                              rig.leg_length) for info, p in parts) for leg in rig.legs]
            # and how high both feet leave the floor there: A over the window, B from it on
            # for as long as the seam's steps may last
            after = slice(b0, b0 + _air_frames(w, fps))
            rep["own_air_m"] = max([float(airborne(info.world[p], info.heads[p], rig, info.floor).max())
                                    for info, p in (parts[0], (ib, after)) if len(info.world[p])], default=0.0)
            # … and how far they move and sink the feet over the frames around it
            near = [(info, slice(max(f0 - 2, 0), f0 + w + 3)) for info, f0 in ((ia, a0), (ib, b0))]
            own = [[own_slide(_foot_points(info.world[p], info.heads[p], rig, leg), info.floor) for info, p in near]
                   for leg in rig.legs]
            rep["own_slide_m"] = [max(o[0] for o in per) for per in own]
            rep["own_depth_m"] = [max(o[1] for o in per) for per in own]
        rep.update(chk)
        seams.append(rep)
    rot = quat.make_continuous(out.rotations)
    return Track(rot, out.positions), seams, planted


def recheck(track, rig, fps, seams, names=None, floor=None):
    """The checks of every seam again on a changed composed track (after hold_feet), each
    against its own limits; updates the seam dicts in place (a seam the change made worse
    fails from then on). With the composition's `floor` (z m), a foot that skates along it
    inside a window more than the clips do there (skating, + SKATE_SLACK) fails the seam
    'plant' too, listed in the seam's "skating": [{"leg", "distance_m", "own_m"}], and so do
    both feet higher off the floor than the clips there have them (+ AIR_SLACK: the lower
    foot's lowest point, over the window and the frames its steps may take, `_air_frames`):
    the seam's "airborne" {"height_m", "own_m", "frames": [first, last] composed frames},
    else None; and so does a foot that slides on the floor or sinks below it more than the
    clips (_floor_faults; the sinking ones in the seam's "sinking"). Run on the output
    whether or not the feet were held: the checks measure what the track does."""
    world, heads = forward(track, rig)
    for s in seams:
        chk = check_seam(world, track.positions[:, rig.root_position], fps, s["start"], s["window"], s["limits"],
                         names)
        s["skating"] = []
        if floor is not None and rig.has_legs:
            # a foot landing inside the window is neither planted in either clip nor held
            # until it stops: the blend can drag it along the floor
            part = slice(s["start"], s["start"] + s["window"] + 1)
            for k, leg in enumerate(rig.legs):
                pts = _foot_points(world[part], heads[part], rig, leg)
                d, own = skating(pts, fps, floor, rig.leg_length), s["own_skate_m"][k]
                if d > own + SKATE_SLACK:
                    s["skating"].append({"leg": k, "distance_m": d, "own_m": own})
            # both feet stepping over the same frames lift a standing body off the floor
            part = slice(s["start"], s["start"] + _air_frames(s["window"], fps))
            air = airborne(world[part], heads[part], rig, floor)
            up = np.flatnonzero(air > s["own_air_m"] + AIR_SLACK)
            s["airborne"] = {"height_m": float(air.max()), "own_m": s["own_air_m"],
                             "frames": [int(s["start"] + up[0]), int(s["start"] + up[-1])]} if len(up) else None
            s["sinking"] = _floor_faults(world, heads, rig, s, floor)
        if s.get("unheld") or s["skating"] or s.get("airborne") or s.get("sinking"):
            # a foot on the floor through the seam that could not be held slides there
            chk["failures"] = chk["failures"] + ["plant"]
            chk["passed"] = False
        s.update(chk)
        s["flagged"] = not chk["passed"]


def _floor_faults(world, heads, rig, seam, floor):
    """Feet of one seam (a compose() seam dict) that the output, world rotations (F, B, 4)
    and heads, moves along the floor or pushes into it more than the clips do: over the
    window and 2 frames each side, a foot on the floor throughout that slides (floor_slide)
    more than SKATE_SLACK beyond the clips' own slide there (seam "own_slide_m") is added
    to seam["skating"] ({"leg", "distance_m", "own_m"}); one whose lowest point goes more
    than SKATE_SLACK deeper below `floor` (z m) than the clips there ("own_depth_m") and
    moves more than SKATE_SLACK under it (a still foot a little low is not dragged through
    the floor) is returned: [{"leg", "depth_m", "own_m", "slide_m" (its path below the
    floor)}]."""
    part = slice(max(seam["start"] - 2, 0), seam["start"] + seam["window"] + 3)
    sinking = []
    for k, leg in enumerate(rig.legs):
        slide, depth, sunk = floor_slide(_foot_points(world[part], heads[part], rig, leg), floor, rig.leg_length)
        if slide > seam["own_slide_m"][k] + SKATE_SLACK and all(x["leg"] != k for x in seam["skating"]):
            seam["skating"].append({"leg": k, "distance_m": slide, "own_m": seam["own_slide_m"][k]})
        if depth > seam["own_depth_m"][k] + SKATE_SLACK and sunk > SKATE_SLACK:
            sinking.append({"leg": k, "depth_m": depth, "own_m": seam["own_depth_m"][k], "slide_m": sunk})
    return sinking


class _SeamPlan:
    """One way to make a seam: the composition `out` so far (its last `free` frames
    unblended, ending with its clip's frame n_prev − 1) runs up to that clip's frame end − 1
    and clip b on from its frame `start`. A window of W frames blends A's frames a0 … a0+W−1
    with B's b0 … b0+W−1 (`frames`): at a transition point a0 = end and b0 = start, both
    moved back by the same number of frames where A has fewer than W frames after end, so
    the blend keeps the matched frames together (a window that would need B's frames
    before 0 does not fit); at the clip ends (end = n_prev, start = 0) A's last W frames
    and B's first W. `attempt(window)` splices and checks; `fits` are the windows that fit
    (at most half of either clip, or max_window, blending none of A's frames before a_from
    nor B's from b_until on); `suggested` the shortest passing one (found) or the one
    closest to passing."""

    def __init__(self, out, free, n_prev, b, ia, ib, end, start, kind, rig, fps, threshold, floor, names,
                 max_window, a_from, b_until):
        self.out, self.free, self.n_prev, self.b, self.ia, self.ib = out, free, n_prev, b, ia, ib
        self.end, self.start, self.kind, self.rig, self.fps = int(end), int(start), kind, rig, fps
        self.threshold, self.floor, self.names = threshold, floor, names
        self.at_ends = (self.end, self.start) == (n_prev, 0)
        limit = min(len(b) - self.start, len(b) // 2, n_prev // 2)
        limit = limit if max_window is None else min(limit, int(max_window))
        self.fits = [cand for cand in range(0, limit + 1)
                     if cand <= self.prepare(cand)[1] and 0 <= self.frames(cand)[1] <= b_until - cand
                     and self.frames(cand)[0] >= a_from]
        self.suggested, self.found, best = 0, False, np.inf
        for cand in self.fits:
            chk = self.attempt(cand)[2]
            if chk["passed"]:
                self.suggested, self.found = cand, True
                break
            if chk["score"] < best:
                self.suggested, best = cand, chk["score"]

    def frames(self, window):
        """(a0, b0): the frames of A and B where a window of `window` frames starts."""
        a0 = min(self.end, self.n_prev - window)
        return a0, (0 if self.at_ends else self.start - (self.end - a0))

    def prepare(self, window):
        """(length of `out` the window ends, room left)."""
        a_end = self.frames(window)[0] + window
        return len(self.out) - (self.n_prev - a_end), self.free - (self.n_prev - a_end)

    def b_cut(self, window):
        """B from its frame b0 on."""
        return self.b.slice(self.frames(window)[1], len(self.b))

    def attempt(self, window, full=False):
        """(track, splice info, check_seam result, A frames used, SeamLimits) of a window;
        full=False splices only the frames the checks read."""
        a_len, _room = self.prepare(window)
        a0, b0 = self.frames(window)
        a_part = self.out.slice(0 if full else max(a_len - window - 3, 0), a_len)
        b_cut = self.b_cut(window)
        b_part = b_cut if full else b_cut.slice(0, min(len(b_cut), window + 3))
        lim = SeamLimits(self.ia, self.ib, a0, b0, window, self.threshold)
        psi, height = _alignment(a_part, len(a_part) - window, self.ib, b0, self.rig, self.floor)
        res, inf = splice(a_part, b_part, window, self.kind, self.rig, psi, height)
        world, _heads = forward(res, self.rig)
        check = check_seam(world, res.positions[:, self.rig.root_position], self.fps, inf["start"], window, lim,
                           self.names)
        return res, inf, check, a_len, lim


# ---------------------------------------------------------------------------- layering

def apply_layer(base, layer, weight, mask=None, reference=None):
    """Additive layer: q = q_base ⊗ (q_layer ⊗ q_ref⁻¹)^w per frame and masked bone.

    base, layer: rotations (F, B, 4); weight: (F,) or scalar (0 = no effect, 1 = the
    layer's full delta); mask: (B,) bool, bones the layer may change (default all);
    reference: q_ref (B, 4) or (F, B, 4), default the layer's first frame. The power is
    exp(w · log(δ)) on the shortest arc. Unmasked bones are returned bit-identical.
    Returns (F, B, 4).
    """
    base = np.asarray(base, dtype=float)
    layer = np.asarray(layer, dtype=float)
    if base.shape != layer.shape:
        raise ValueError(f"layer shape {layer.shape} differs from the base's {base.shape}")
    ref = layer[0] if reference is None else np.asarray(reference, dtype=float)
    w = np.broadcast_to(np.asarray(weight, dtype=float), (len(base),))
    mask = np.ones(base.shape[1], dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    delta = quat.mul(layer[:, mask], quat.conj(np.broadcast_to(ref, layer.shape)[:, mask]))
    scaled = quat.exp(w[:, None, None] * quat.log(delta))
    out = base.copy()
    out[:, mask] = quat.make_continuous(quat.normalize(quat.mul(base[:, mask], scaled)), base[0, mask])
    return out


# ------------------------------------------------------------------------------- feet

def _hold_correction(ankle, segments, ramp):
    """Ankle corrections (F, 3) m: inside each hold segment (start, stop, spot (3,), _) the
    move onto its spot; outside, the correction at the nearest segment frame faded by
    solver.core.posing.plant_weights over `ramp` frames, so the hold comes and goes without a
    jump. Also returns the hold mask (F,) and each frame's nearest segment frame (F,)."""
    hold = np.zeros(len(ankle), dtype=bool)
    goal = ankle.copy()
    for lo, hi, spot, _q in segments:
        hold[lo:hi] = True
        goal[lo:hi] = spot
    inside = goal - ankle
    idx = np.flatnonzero(hold)
    nearest = idx[np.abs(np.arange(len(hold))[:, None] - idx[None]).argmin(axis=1)]
    return posing.plant_weights(hold, ramp)[:, None] * inside[nearest], hold, nearest


def _held_rotations(foot, segments, hold, nearest, ramp):
    """Foot world rotations (F, 4): on each hold segment its rotation (the foot's at the
    segment's first frame), so the whole foot stays put, not only the ankle; outside, the
    change at the nearest segment frame faded like the ankle's (slerp from identity)."""
    target = foot.copy()
    for lo, hi, _spot, q in segments:
        target[lo:hi] = q
    change = quat.mul(target, quat.conj(foot))
    w = posing.plant_weights(hold, ramp)
    ident = np.tile([1.0, 0.0, 0.0, 0.0], (len(foot), 1))
    return quat.mul(quat.slerp(ident, change[nearest], w), foot)


def _landing(touch, still, first, last):
    """(touchdown, still) of a foot around a seam window of frames first … last: of the
    runs of frames where it touches the floor (touch (F,) bool) that reach into the window,
    the first one in which it is still (still (F,) bool) from some frame on; touchdown its
    first frame (the window's first if the foot stands there as the window begins), still
    the first still frame from there (perhaps after the window). None without such a run."""
    for a, b in posing.runs(touch):
        if a <= last and b > first and still[max(a, first):b].any():
            t0 = max(a, first)
            return t0, t0 + int(np.argmax(still[t0:b]))
    return None


def _spot(ankle, foot, offset, lo, floor):
    """Where a hold keeps the foot, in its pose at frame lo: the ankle's horizontal
    position at lo at the height that puts the foot's lowest point (ankle z + offset (F,))
    on floor, and the foot's world rotation (4,) at lo."""
    return np.array([ankle[lo, 0], ankle[lo, 1], floor - offset[lo]]), foot[lo]


def _leg_ik(world, heads, leg, ankle, goal, w_foot):
    """(act (F,) bool, thigh and shin world rotations (n, 4) on the act frames): the frames
    where the ankle (F, 3) m must move to goal (F, 3) or the foot turn to w_foot (F, 4),
    and there the leg that puts it there: the composed leg turned as a whole about the hip
    towards the goal (solver.core.posing.swing), then bent at the knee in its own plane by
    solver.core.posing.two_bone_ik; world (F, B, 4) and heads (F, B, 3) as composed."""
    thigh, shin, foot, _toes = leg
    act = np.any(goal != ankle, axis=1) | np.any(w_foot != world[:, foot], axis=1)
    hip, knee, end = heads[act, thigh], heads[act, shin], ankle[act]
    # the leg first turned as a whole about the hip towards the goal, so the IK only
    # bends the knee in the leg's own bend plane: solved from the leg as composed, the
    # knee would change sides in one frame where the goal crosses it
    aim = posing.swing(end - hip, goal[act] - hip)
    knee = hip + np.einsum("fij,fj->fi", aim, knee - hip)
    end = hip + np.einsum("fij,fj->fi", aim, end - hip)
    toe_dir = quat.rotate(w_foot[act], np.array([0.0, 1.0, 0.0]))
    d_up, d_low = posing.two_bone_ik(hip, knee, end, goal[act], knee + toe_dir)
    return act, quat.mul(quat.from_matrix(d_up @ aim), world[act, thigh]), \
        quat.mul(quat.from_matrix(d_low @ aim), world[act, shin])


def _turns_too_fast(w_new, w_old, lo, hi):
    """Whether a bone of new world rotations (F, 4) turns in one frame between frames lo and
    hi by more than a seam may (STEP_LIMIT, or STEP_RATIO faster than it turned as
    composed, w_old (F, 4))."""
    new = quat.angle_between(w_new[lo + 1:hi], w_new[lo:hi - 1])
    old = quat.angle_between(w_old[lo + 1:hi], w_old[lo:hi - 1])
    return bool(np.any(new > np.maximum(STEP_LIMIT, old * (1.0 + STEP_RATIO))))


def _across(n):
    """How far across (n,) a step of n frames is at each frame: the integral of sin⁴(π t),
    normalised (0 at t = 0, 1 at t = 1)."""
    t = np.linspace(0.0, 1.0, n)
    return t - 2.0 / (3.0 * np.pi) * np.sin(2 * np.pi * t) + np.sin(4 * np.pi * t) / (12.0 * np.pi)


def _swing(start, end, z, ground, height):
    """Ankle path (n, 3) m of one step from `start` to `end` (3,) over n frames: the foot
    lifts from its own path z (n,) by sin²(π t) (t = 0 … 1: starting and ending at rest,
    no velocity jump in the leg) times height plus how far z lies below `ground` (n,) (the
    ankle height that puts the foot's lowest point on the floor), and moves across at a
    speed ∝ sin⁴(π t), the lift's square, so it barely moves while near the floor (1.4 %
    of the way by t = 0.2): it neither scuffs as it leaves nor as it lands (`_across`)."""
    t = np.linspace(0.0, 1.0, len(z))
    path = start + _across(len(z))[:, None] * (end - start)
    path[:, 2] = z + np.sin(np.pi * t) ** 2 * (height + np.maximum(ground - z, 0.0))
    return path


def _steps(ankle, down, start, spot, window_end, stop, fps, leg_length):
    """Landing frames [start, l1, …, lk] of the steps that take a foot from `spot` (3,)
    (where it stands at frame `start`) to where the composed foot (ankle (F, 3) m) is down
    next (down (F,) bool): the first down frame from window_end on, waited for up to
    STEP_WAIT s while the foot is in the air, before frame `stop` (the next seam). The
    stepping lasts STEP_STRETCH times the window (at most while the foot stays down
    there), in k = ⌈distance / (STEP_REACH · leg_length)⌉ equal steps of at least
    STEP_FRAMES s each, at most MAX_STEPS. None when there is no such landing."""
    last = min(stop, len(down), window_end + int(round(STEP_WAIT * fps)) + 1)
    landing = window_end + int(np.argmax(down[window_end:last])) if window_end < last else last
    if landing >= last or not down[landing]:
        return None
    run = landing + (int(np.argmin(down[landing:stop])) if not down[landing:stop].all() else stop - landing) - 1
    end = min(max(landing, start + int(np.ceil(STEP_STRETCH * (window_end - start)))), run)
    dist = float(np.linalg.norm(ankle[end, :2] - spot[:2]))
    k = max(1, int(np.ceil(dist / (STEP_REACH * leg_length))))
    if k > MAX_STEPS or (end - start) < k * STEP_FRAMES * fps:
        return None
    return [int(x) for x in np.round(np.linspace(start, end, k + 1))]


def _step_path(goal, swings, ground, height):
    """Ankle path (n, 3) m over the frames lo … hi of a stepping: swings [(a, b), …] in
    time order, lo the first swing's a and hi the last's b unless given as swings[0] =
    (lo, lo) and swings[-1] = (hi, hi) (no swing, standing). The foot stands at the goal
    (F, 3) at lo until its first swing, each swing (`_swing`) takes it an equal part of the
    way to the goal at hi, and it stands where it landed until the next swing (at that
    part of the way in height too; its own path z is moved there); ground (F,) the ankle
    height that puts the foot on the floor. Swings one after the other (no standing
    between) follow the goal's own height, as steps landing at the given frames."""
    lo, hi = swings[0][0], swings[-1][1]
    swings = [(a, b) for a, b in swings if b > a]
    first, last = goal[lo].copy(), goal[hi].copy()
    path = goal[lo:hi + 1].copy()
    k = len(swings)
    at, z, prev = first, goal[lo, 2], lo
    for j, (a, b) in enumerate(swings):
        path[prev - lo + 1:a - lo + 1] = [at[0], at[1], z]
        nxt = first + (j + 1) / k * (last - first)
        # landing where it stands a while: at that part of the way in height too (both ends
        # stand on the floor), not at the height its own path has there
        end = nxt[2] if (swings[j + 1][0] if j + 1 < k else hi) > b else goal[b, 2]
        t = np.linspace(0.0, 1.0, b - a + 1)
        own = goal[a:b + 1, 2] + (1.0 - t) * (z - goal[a, 2]) + t * (end - goal[b, 2])
        path[a - lo:b - lo + 1] = _swing(at, nxt, own, ground[a:b + 1], height)
        at, z, prev = nxt, end, b
    path[prev - lo + 1:] = [at[0], at[1], z]
    return path


def _consecutive(landings):
    """Swings [(a, b), …] of steps landing at frames `landings`, one after the other."""
    return list(zip(landings, landings[1:]))


def _lifted(swings, n):
    """(n,) bool: the frames a foot is lifted by swings [(a, b), …] (a + 1 … b − 1)."""
    mask = np.zeros(n, dtype=bool)
    for a, b in swings:
        mask[a + 1:b] = True
    return mask


def _alternate(plans, latest, air, hips, fps):
    """Ways for one seam's steppings to take turns, so that no foot is lifted while the
    other is off the floor (a standing body does not hop). plans: {leg: landings}
    (`_steps`, each [lo, …, hi], steps landing at equal times); latest {leg: frame}: the
    last frame each may land at (while it stays down there); air (legs, F) bool: where
    each foot is off the floor as composed and held, outside its stepping; hips (legs, F,
    3) m: each leg's hip (for `_paced`). Returns (given, candidates), each a {leg: swings
    [(a, b), …]} (`_step_path`): given the steps as planned; candidates (best first, empty
    where the given steps already avoid the other foot's air and swings): a foot stepping
    alone lifts only within a stretch of its stepping where the other foot is down (the
    longest first), in steps equal in time; two feet stepping at one seam in turns (orders
    with fewer steps of one foot in a row first; the foot with more steps, or the one
    that must land first, leads) from the later of their first frames, each step as long
    as the foot's own planned ones (so no leg moves faster than planned), all shortened
    alike where they would land later than `latest`; then each moved towards the hip's
    pace (`_paced`), every step at least STEP_FRAMES s."""
    n = air.shape[1]
    shortest = int(np.ceil(STEP_FRAMES * fps))
    given = {k: _consecutive(l) for k, l in plans.items()}

    def blocked(k):
        # the other foot's air: as composed outside its own stepping, its swings inside
        o = 1 - k
        mask = air[o].copy()
        if o in plans:
            lo, hi = plans[o][0], plans[o][-1]
            mask[lo:hi + 1] = _lifted(given[o], n)[lo:hi + 1]
        return mask
    if not any((_lifted(given[k], n) & blocked(k)).any() for k in plans):
        return given, []

    def framed(k, swings):
        end = max(plans[k][-1], swings[-1][1])
        return [(plans[k][0], plans[k][0])] + swings + [(end, end)]
    candidates = []
    if len(plans) == 1:
        (k, land), = plans.items()
        lo, hi, steps = land[0], land[-1], len(land) - 1
        # a swing may begin and end on a frame the other foot is still in the air (no lift)
        spans = [(max(lo + r0 - 1, lo), min(lo + r1, hi)) for r0, r1 in posing.runs(~blocked(k)[lo:hi + 1])]
        for a, b in sorted(spans, key=lambda sp: (sp[0] - sp[1], sp[0])):
            if b - a >= steps * shortest:
                even = [int(x) for x in np.round(np.linspace(a, b, steps + 1))]
                candidates += [{k: framed(k, _consecutive(c))} for c in _paced(even, hips[k], fps)]
        return given, candidates
    counts = {k: len(l) - 1 for k, l in plans.items()}
    lead = min(plans, key=lambda k: (-counts[k], plans[k][-1], k))
    lo, room = max(l[0] for l in plans.values()), min(latest.values())
    total = sum(counts.values())
    duration = {k: (l[-1] - l[0]) / (len(l) - 1) for k, l in plans.items()}
    orders = {tuple(int(j in c) for j in range(total)) for c in itertools.combinations(range(total), counts[1])}
    orders = sorted(orders, key=lambda o: (int(np.sum(np.diff(o) == 0)), o[0] != lead, o))
    for order in orders:
        lengths = np.array([duration[o] for o in order])
        lengths *= min(1.0, (room - lo) / lengths.sum())
        if lengths.min() < shortest:
            continue
        bounds = [int(x) for x in np.round(lo + np.concatenate([[0.0], np.cumsum(lengths)]))]
        for c in _paced(bounds, hips.mean(axis=0), fps):
            candidates.append({k: framed(k, [(c[j], c[j + 1]) for j, o in enumerate(order) if o == k])
                               for k in plans})
    return given, candidates


def _paced(landings, hip, fps):
    """Landing frames (tuples, the given ones first) of the same steps as `landings`, moved
    step by step towards the body's pace: there step j of k lands when the hip (F, 3) m
    has covered j/k of its horizontal way from the first landing to the last (each step at
    least STEP_FRAMES s long), so a foot can keep up with a body that moves early or late
    in the stepping (landings equal in time can leave it out of the leg's reach). Eleven
    candidates, from equal times to the hip's pace."""
    lo, hi, k = landings[0], landings[-1], len(landings) - 1
    way = hip[hi, :2] - hip[lo, :2]
    if k < 2 or not way @ way > 0.0:
        return [tuple(landings)]
    done = np.maximum.accumulate((hip[lo:hi + 1, :2] - hip[lo, :2]) @ way / (way @ way))
    shortest = int(STEP_FRAMES * fps)
    paced = [lo]
    for j in range(1, k):
        at = lo + int(np.argmax(done >= j / k))
        paced.append(min(max(at, paced[-1] + shortest), hi - (k - j) * shortest))
    paced.append(hi)
    even = np.asarray(landings, dtype=float)
    return list(dict.fromkeys(tuple(int(x) for x in np.round(even + lam * (np.asarray(paced) - even)))
                              for lam in np.linspace(0.0, 1.0, 11)))


def _leg_miss(points, hip, longest, shortest):
    """How far (m) ankle points (n, 3) lie beyond the leg's reach from the hip (n, 3)
    (longest (n,): thigh + shin) or closer to it than the knee can fold (shortest (n,):
    |thigh − shin|), at most (≤ 0: the leg reaches every one without straightening)."""
    reach = np.linalg.norm(points - hip, axis=1)
    return float(np.maximum(reach - longest, shortest - reach).max())


def _step_miss(goal, swings, ground, height, hip, longest, shortest):
    """(`_leg_miss` m, path (n, 3)) of a stepping by swings (`_step_path`, lifted by
    height m) for a hip (F, 3) and leg lengths longest, shortest (F,)."""
    lo, hi = swings[0][0], swings[-1][1] + 1
    path = _step_path(goal, swings, ground, height)
    return _leg_miss(path, hip[lo:hi], longest[lo:hi], shortest[lo:hi]), path


def hold_feet(track, rig, fps, seams, planted, floor):
    """Planted feet held still across the seams. A foot is down where it is planted
    (planted (F, legs) bool from compose: in either clip inside a window) or no faster
    than SHUFFLE · PLANT_SPEED, and low as composed (its lowest point within PLANT_HEIGHT ·
    leg length of `floor`, z m), gaps of PLANT_GAP frames joined. A foot on the floor in a
    seam's window (standing as it begins, or landing in it, `_landing`) that is down and
    still from some frame on is held at one spot until it lifts off (as composed: the
    blend lifting it towards the next clip's swing lets it go) or the next seam's hold
    takes over (keeping the spot). The spot is the foot as it settles (the first frame
    from the still one where its ankle sinks no faster than SETTLE_SPEED · leg length per
    second and it turns no faster than SETTLE_TURN: a foot landing from a jump stops
    moving along the floor before it has rolled flat): the ankle's horizontal position
    there, at the height that puts the foot's lowest point on the floor, and the foot's
    world rotation there. It is held from the touchdown (so the blend cannot drag a
    landing foot along the floor), else from the still frame, else at the still frame's
    own spot: the first of these the leg reaches without straightening, else the last
    within PLANT_MISS; reached by a two-bone IK of thigh and shin (`_leg_ik`) blended in
    and out over PLANT_RAMP s (solver.core.posing.plant_weights), the foot's rotation blended
    back the same way after lift-off.

    A hold the leg cannot reach within PLANT_MISS, or needing more than HOLD_REACH · leg
    length, is not made; the foot steps instead (`_steps`, `_swing`): to where it is down
    next from the window's end on (waiting up to STEP_WAIT s for a foot in the air to
    land), over STEP_STRETCH windows, in as many steps of at most STEP_REACH · leg length
    as that distance needs (at most MAX_STEPS), each lifted STEP_HEIGHT · leg length and
    moving across only while lifted, landing at equal times or, where the leg cannot follow
    those, paced by the hip (`_paced`). The two feet take turns (`_alternate`): where a
    foot's steps would lift it while the other is off the floor (AIR_SLACK above it, or
    its own steps at the same seam), it steps where the other is down, or both feet step
    one after the other, in the first such way both legs reach within PLANT_MISS (else as
    planned: recheck then says the body hops). A stepping starts where the foot stood the
    frame before it. A stepping the leg cannot reach within PLANT_MISS,
    or that turns the thigh or shin faster in a frame than a seam may, is not made either:
    then the foot slides and its seam fails 'plant' (in recheck).

    Returns (track, plants): plants a list of {"seam" (index), "leg" (0 left, 1 right),
    "frames": [first, last] (the frames held, or that would be), "held" (False: out of
    reach), "step" (it steps instead), "correction_m" (the largest ankle correction a hold
    would need, m)} of the feet down in a seam's window."""
    if not rig.has_legs or not seams:
        return track, []
    world, heads = forward(track, rig)
    rot = track.rotations.copy()
    ramp = max(2, int(round(PLANT_RAMP * fps)))
    plants, legs, air, latest = [], [], [], {}
    for k, leg in enumerate(rig.legs):
        thigh, shin, foot, _toes = leg
        ankle = heads[:, foot]
        offset = _lowest(world, heads, rig, leg)[:, 2] - ankle[:, 2]
        segments, steps = [], []
        # still down: planted (in either clip inside a window), or no faster than a shuffle
        # (a swinging foot is faster), and low as composed: inside a window the blend lifts
        # a foot towards where the next clip swings it, and the hold lets go as it rises
        speed = np.linalg.norm(np.gradient(ankle[:, :2], axis=0), axis=1) * fps
        low = ankle[:, 2] + offset <= floor + PLANT_HEIGHT * rig.leg_length
        mask = posing.joined(planted[:, k] & low, PLANT_GAP)
        down = posing.joined((planted[:, k] | (speed <= SHUFFLE * PLANT_SPEED * rig.leg_length)) & low, PLANT_GAP)
        upper = np.linalg.norm(heads[:, shin] - heads[:, thigh], axis=1)
        lower = np.linalg.norm(ankle - heads[:, shin], axis=1)
        longest, shortest = upper + lower, np.abs(upper - lower)
        touch = posing.joined(low, PLANT_GAP) | mask
        # a landing foot has settled once its ankle no longer sinks and it no longer turns
        # (rolling onto its heel, or off its toes after a jump)
        turn = quat.angle_between(world[2:, foot], world[:-2, foot]) * fps / 2.0
        unsettled = (np.gradient(ankle[:, 2]) * fps < -SETTLE_SPEED * rig.leg_length) \
            | (np.r_[turn[0], turn, turn[-1]] > SETTLE_TURN)
        for i, seam in enumerate(seams):
            # the foot lands (touches the floor) in the window, or stands there as it begins,
            # and is still there from some frame on (h0, perhaps after the window)
            s0, w = seam["start"], max(int(seam["window"]), 0)
            found = _landing(touch, mask & (speed <= SHUFFLE * PLANT_SPEED * rig.leg_length), s0, s0 + w)
            if found is None:
                continue       # the foot is not on the floor in the window: nothing to keep
            t0, h0 = found
            # held until it lifts off the floor, or the next seam takes over: a hold released
            # while the foot is still down would slide it back to its own spot
            hi = h0 + int(np.argmin(down[h0:])) if not down[h0:].all() else len(down)
            if i + 1 < len(seams):
                hi = min(hi, seams[i + 1]["start"])
            # at the spot where it settles, from where it touches down, so the blend cannot drag
            # it along the floor before it stops nor freeze it mid-landing, on tiptoe (a foot
            # already settled as it stops, e.g. standing as the window begins, settles there);
            # else from where it stops, at its settled spot or where it stops
            settle = h0 + int(np.argmin(unsettled[h0:hi])) if unsettled[h0] and not unsettled[h0:hi].all() else h0
            tries = []
            for start, at in dict.fromkeys(((t0, settle), (h0, settle), (h0, h0))):
                if start >= hi:
                    continue       # the next seam comes first: its hold takes the foot from there
                # a hold that continues the previous one keeps its spot
                spot, q = segments[-1][2:] if segments and segments[-1][1] == start else \
                    _spot(ankle, world[:, foot], offset, at, floor)
                need = float(np.linalg.norm(spot - ankle[start:hi], axis=1).max())
                # and the leg reaches the spot (a straight leg cannot move its foot sideways)
                miss = _leg_miss(spot[None], heads[start:hi, thigh], longest[start:hi], shortest[start:hi])
                tries.append((start, spot, q, need, miss))
            if not tries:
                continue
            # the first the leg reaches without straightening (a knee that straightens
            # mid-hold jumps), else the hold from where it stops, within PLANT_MISS
            start, spot, q, need, miss = next((t for t in tries if t[3] <= HOLD_REACH * rig.leg_length and t[4] <= 0.0),
                                              tries[-1])
            ok = bool(need <= HOLD_REACH * rig.leg_length and miss <= PLANT_MISS)
            h0 = start
            nxt = seams[i + 1]["start"] if i + 1 < len(seams) else len(down)
            # the next clip stands this foot elsewhere: rather than sliding it there, the
            # foot steps (`_steps`), landing where that clip has it down next
            path = None if ok or s0 + w - h0 < 2 else _steps(ankle, down, h0, spot, s0 + w, nxt, fps, rig.leg_length)
            step = path is not None
            plants.append({"seam": seam["index"], "leg": k, "frames": [int(h0), int(hi - 1)], "held": ok,
                           "step": step, "correction_m": need})
            if ok:
                segments.append((h0, hi, spot, q))
            elif step:
                steps.append((path, seam, plants[-1]))
                # the latest it may land: while the foot stays down where it lands
                end = path[-1]
                latest[k, seam["index"]] = end + (int(np.argmin(down[end:nxt])) if not down[end:nxt].all()
                                                  else nxt - end) - 1
            else:
                seam["unheld"] = True
        correction, hold, nearest = _hold_correction(ankle, segments, ramp) if segments else \
            (np.zeros_like(ankle), np.zeros(len(ankle), bool), None)
        w_foot = _held_rotations(world[:, foot], segments, hold, nearest, ramp) if segments else world[:, foot]
        goal = ankle + correction
        for landings, _seam, _plant in steps:
            # a stepping starts where the foot stood the frame before (the window's first
            # frame already blends it a little towards the next clip's stance)
            goal[landings[0]] = goal[max(landings[0] - 1, 0)]
        legs.append({"leg": leg, "ankle": ankle, "offset": offset, "steps": steps, "correction": correction,
                     "goal": goal, "w_foot": w_foot, "longest": longest, "shortest": shortest,
                     "changed": bool(segments or steps)})
        # off the floor: neither held nor down, or higher than AIR_SLACK above it
        air.append(~hold & (~down | (ankle[:, 2] + offset > floor + AIR_SLACK)))
    # the two feet's steppings take turns: a foot lifts only while the other is down, the
    # first way (`_alternate`: the least hurried first) both legs reach within PLANT_MISS;
    # else the steps as planned (and recheck says the body hops)
    air = np.array(air)
    hips = np.stack([heads[:, st["leg"][0]] for st in legs])
    lift = STEP_HEIGHT * rig.leg_length
    swings = {}
    for seam in seams:
        plans = {k: landings for k, st in enumerate(legs) for landings, sm, _p in st["steps"] if sm is seam}
        if not plans:
            continue
        given, candidates = _alternate(plans, {k: latest[k, seam["index"]] for k in plans}, air, hips, fps)

        def miss(cand):
            return max(_step_miss(legs[k]["goal"], sw, floor - legs[k]["offset"], lift, hips[k], legs[k]["longest"],
                                  legs[k]["shortest"])[0] for k, sw in cand.items())
        chosen = next((c for c in candidates if miss(c) <= PLANT_MISS), None)
        for k, sw in (chosen or given).items():
            if chosen:
                swings[k, seam["index"]] = sw
            lo, hi = sw[0][0], sw[-1][1]
            air[k, lo:hi + 1] = _lifted(sw, air.shape[1])[lo:hi + 1]
    for k, st in enumerate(legs):
        if not st["changed"]:
            continue
        leg, ankle, offset, steps, correction = st["leg"], st["ankle"], st["offset"], st["steps"], st["correction"]
        thigh, shin, foot, _toes = leg
        goal, w_foot, longest, shortest = st["goal"], st["w_foot"], st["longest"], st["shortest"]
        blended = w_foot.copy()
        for n, (landings, seam, plant) in enumerate(steps):
            # the feet taking turns where they must (chosen above); else landings evenly
            # spaced in time; where the leg cannot follow them (the body gets there sooner or later
            # than the feet), the first ones nearer to the hip's pace that it reaches
            # without straightening (`_step_miss`), else the equal times, within PLANT_MISS
            turns = swings.get((k, seam["index"]))
            tries = [(_step_miss(goal, sw, floor - offset, lift, heads[:, thigh], longest, shortest), sw)
                     for sw in ([turns] if turns else [_consecutive(c) for c in _paced(landings, heads[:, thigh], fps)])]
            (miss, path), sw = next((t for t in tries if t[0][0] <= 0.0), tries[0])
            lo, hi = sw[0][0], sw[-1][1] + 1
            steps[n] = (sw, seam, plant)
            if miss > PLANT_MISS:
                plant["step"], seam["unheld"] = False, True
            else:
                goal[lo:hi] = path
                # and the foot turns only while lifted, too (standing still between steps)
                # (steps one after the other turn it to its own rotation at each landing;
                # steps taking turns with the other foot's, an equal part of its turn each)
                q, prev = w_foot[lo].copy(), lo
                lifts = [(a, b) for a, b in sw if b > a]
                ends = [w_foot[b].copy() for _a, b in lifts] if lifts == sw else \
                    list(quat.slerp(np.tile(q, (len(lifts), 1)), np.tile(w_foot[hi - 1], (len(lifts), 1)),
                                    np.arange(1, len(lifts) + 1) / len(lifts)))
                for (a, b), end in zip(lifts, ends):
                    w_foot[prev + 1:a + 1] = q
                    w_foot[a:b + 1] = quat.slerp(q, end, _across(b - a + 1))
                    q, prev = w_foot[b].copy(), b
                w_foot[prev + 1:hi] = q

        def solve():
            act, up, low_ = _leg_ik(world, heads, leg, ankle, goal, w_foot)
            w_thigh, w_shin = world[:, thigh].copy(), world[:, shin].copy()
            w_thigh[act], w_shin[act] = up, low_
            return act, w_thigh, w_shin
        act, w_thigh, w_shin = solve()
        for sw, seam, plant in steps:
            # nor one whose leg turns faster than a seam may (a knee that the IK flips)
            f0, f1 = sw[0][0], sw[-1][1] + 1
            lo, hi = max(f0 - 1, 0), min(f1 + 1, len(goal))
            if plant["step"] and (_turns_too_fast(w_thigh, world[:, thigh], lo, hi)
                                  or _turns_too_fast(w_shin, world[:, shin], lo, hi)):
                plant["step"], seam["unheld"] = False, True
                goal[f0:f1] = (ankle + correction)[f0:f1]
                w_foot[f0:f1] = blended[f0:f1]
                act, w_thigh, w_shin = solve()
        parent = world[act, rig.parents[thigh]]
        rot[act, thigh] = quat.mul(quat.conj(quat.mul(parent, rig.rest_rotation[thigh])), w_thigh[act])
        rot[act, shin] = quat.mul(quat.conj(quat.mul(w_thigh[act], rig.rest_rotation[shin])), w_shin[act])
        rot[act, foot] = quat.mul(quat.conj(quat.mul(w_shin[act], rig.rest_rotation[foot])), w_foot[act])
    rot = quat.make_continuous(rot)
    return Track(rot, track.positions), sorted(plants, key=lambda p: (p["seam"], p["leg"]))
