"""Contacts that carry meaning in signing, found in a source motion and kept on a target.

A fingertip on the chin, the thumb on the index, two palms meeting: proportions differ
between performer and character, so a rotation transfer breaks them. This module

1. detects contacts in the source from its own skeleton: a proportional body (a face made
   of ellipsoids, palms as boxes, finger pads as spheres) scaled by the distance between
   the shoulder joints; each contact has a frame run, ease-in/out weights, two parts
   ("index_R" and "chin", "palm_L" and "palm_R", "thumb_R" and "index_R") and the spot
   on each in coordinates that transfer between bodies: on the face, relative to the
   head's box (chin, nose, ears and crown normalised to [−1, 1] along left, forward, up);
   on a palm, in the palm's frame normalised by its half length, width and thickness;
2. enforces them on the target: per frame, damped least squares inverse kinematics of
   the arm and finger chains (rotation vectors of each joint, weighted so arms move more
   than fingers) puts the part's skin spot onto the other part's skin spot, then moves
   it out along the surface normal until no skin vertex of the part is inside the other
   part (signed distance, solver.core.sdf.mesh_signed_distance); the correction is faded in
   and out with a C² ramp (smootherstep) around each run and left zero elsewhere.

Lengths are metres (world space); frames are output frame indices. Sources: Buss,
"Introduction to Inverse Kinematics with Jacobian Transpose, Pseudoinverse and Damped
Least Squares methods" (2004); Wampler, "Manipulator inverse kinematic solutions based
on vector formulations and damped least-squares methods" (IEEE SMC, 1986).
"""
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.ndimage import gaussian_filter1d
from scipy.signal import savgol_filter
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from ..core import kernels, kinematics, posing, quat, sdf

REFERENCE_SHOULDERS = 0.335   # m between the shoulder joints of the reference adult below
# The reference adult's face (head bone's head at the origin; axes left, forward, up; m):
# cranium, jaw and face, nose, chin, cheeks, ears (an adult's proportions).
FACE_SOLIDS = (
    ((0.0, -0.020, 0.075), (0.075, 0.097, 0.098)),
    ((0.0, 0.002, 0.012), (0.064, 0.078, 0.075)),
    ((0.0, 0.082, 0.045), (0.010, 0.019, 0.021)),
    ((0.0, 0.062, -0.042), (0.024, 0.016, 0.017)),
    ((0.040, 0.055, 0.020), (0.024, 0.015, 0.022)),
    ((-0.040, 0.055, 0.020), (0.024, 0.015, 0.022)),
    ((0.074, -0.010, 0.055), (0.010, 0.018, 0.028)),
    ((-0.074, -0.010, 0.055), (0.010, 0.018, 0.028)),
)
# Face landmarks on that face (same frame, m): the spot's name is its nearest landmark.
LANDMARKS = {"chin": (0.0, 0.070, -0.050), "mouth": (0.0, 0.072, 0.000), "nose": (0.0, 0.100, 0.045),
             "cheek_L": (0.052, 0.066, 0.020), "cheek_R": (-0.052, 0.066, 0.020),
             "forehead": (0.0, 0.060, 0.120), "ear_L": (0.084, -0.010, 0.055),
             "ear_R": (-0.084, -0.010, 0.055), "crown": (0.0, -0.02, 0.173)}
FINGER_RADIUS = 0.0075        # m, a reference adult's fingertip pad
PALM_HALF_THICKNESS = 0.013   # m, a reference adult's palm
TOUCH = 0.004                 # m (reference adult) from touching counts as a contact
SLOW = 0.15                   # m/s (reference adult): parts resting on each other move slower
MIN_RUN = 2                   # frames a contact lasts at least
HOLD = 2.0                    # a contact lasts while its parts stay within HOLD · TOUCH and HOLD · SLOW
SMOOTH_SECONDS = 0.2          # s: the window of the local cubic fit distances and speeds are read from
RAMP_SECONDS = 0.4            # ease-in and ease-out of each correction
FINGERS = ("thumb", "index", "middle", "ring", "pinky")


def _unit(v):
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def _rot(m):
    """Rotation parts (..., 3, 3) of rigid transforms that may carry a uniform scale."""
    r = np.asarray(m)[..., :3, :3]
    return r / np.linalg.norm(r[..., :, :1], axis=-2, keepdims=True)


@dataclass(eq=False)
class Contact:
    """One contact: part_a touches part_b on frames [start, stop) (output frame indices).

    kind: "face", "palm" or "finger" (what part_b is); spot_a, spot_b (stop − start, 3):
    the spot on each part per frame in transferable coordinates (see the module
    docstring); weights (F,) in [0, 1]: 1 on the run, easing to 0 around it; enabled:
    False when the animator switched it off.
    """
    kind: str
    part_a: str
    part_b: str
    start: int
    stop: int
    spot_a: np.ndarray
    spot_b: np.ndarray
    weights: np.ndarray = None
    enabled: bool = True
    measured: dict = field(default_factory=dict)

    @property
    def name(self):
        return f"{self.part_a}-{self.part_b}"


# ---------------------------------------------------------------------------------------
# body frames from a skeleton's posed matrices

def head_frames(mats, head, axes_world, at=0):
    """Origins (F, 3) and axes (F, 3, 3) (columns left, forward, up) of the head: its
    bone's posed world matrices mats (F, N, 4, 4), with axes_world (3, 3) (columns) the
    body's left, forward, up at frame `at`, carried by the head bone's rotation."""
    R = _rot(mats[:, head])
    local = R[at].T @ axes_world
    return mats[:, head, :3, 3], R @ local


def palm_frames(heads, hand, bases, side):
    """Palm centre (F, 3), axes (F, 3, 3) (columns across, along, normal to the palm side)
    and half sizes (3,) (width, length, thickness-free: 0) from the wrist heads (F, 3)
    and finger base heads (F, k ≥ 2, 3), index first and little finger last (no thumb).
    side "L" or "R": the normal is along ± along × across so it points to the palm side.
    """
    wrist = heads[:, hand]
    knuckles = heads[:, bases]
    along = _unit(knuckles.mean(axis=1) - wrist)
    across = knuckles[:, 0] - knuckles[:, -1]
    across = _unit(across - np.sum(across * along, -1, keepdims=True) * along)
    normal = np.cross(along, across) * (1.0 if side == "L" else -1.0)
    centre = 0.5 * (wrist + knuckles.mean(axis=1))
    half = np.array([0.5 * np.linalg.norm(knuckles[0, 0] - knuckles[0, -1]) + 0.01,
                     0.5 * np.linalg.norm(knuckles[0].mean(0) - wrist[0]), 0.0])
    return centre, np.stack([across, along, normal], axis=-1), half


# ---------------------------------------------------------------------------------------
# the source's proportional body and detection

def _ellipsoid_distance(q, centres, radii):
    """Approximate signed distance (k,) m and outward normals (k, 3) from points q (k, 3)
    to the union of axis-aligned ellipsoids (the level set g = |x / a| first-order)."""
    best = np.full(len(q), np.inf)
    normal = np.zeros_like(q)
    for c, a in zip(centres, radii):
        x = (q - c) / a
        g = np.linalg.norm(x, axis=1)
        grad = x / a / np.maximum(g, 1e-12)[:, None]
        d = (g - 1.0) / np.maximum(np.linalg.norm(grad, axis=1), 1e-12)
        better = d < best
        best[better] = d[better]
        normal[better] = _unit(grad[better])
    return best, normal


FRONT = 0.8   # the chin is the lowest point of the face's front fifth (the throat is behind it)


def face_box_of(points):
    """(lo, hi) (3,) of a face skin given as points (k, 3) in the head's anatomical frame
    (left, forward, up): the skin above the chin, the chin being the lowest point in the
    front fifth of the head's depth (skins that include the neck end there)."""
    lo, hi = points.min(axis=0), points.max(axis=0)
    front = points[:, 1] >= lo[1] + FRONT * (hi[1] - lo[1])
    chin = points[front, 2].min()
    head = points[points[:, 2] >= chin]
    return head.min(axis=0), head.max(axis=0)


def reference_face_box(scale=1.0):
    """(lo, hi) of the reference face (FACE_SOLIDS) scaled by `scale`."""
    c = np.array([s[0] for s in FACE_SOLIDS])
    a = np.array([s[1] for s in FACE_SOLIDS])
    return scale * (c - a).min(axis=0), scale * (c + a).max(axis=0)


def normalise(p, box):
    """Points (…, 3) → box coordinates in [−1, 1] per axis."""
    lo, hi = box
    return 2.0 * (p - lo) / (hi - lo) - 1.0


def denormalise(u, box):
    """Box coordinates (…, 3) → points (inverse of normalise)."""
    lo, hi = box
    return lo + 0.5 * (np.asarray(u) + 1.0) * (hi - lo)


def face_region(u):
    """The face landmark nearest to a spot in reference box coordinates u (3,)."""
    box = reference_face_box()
    names = list(LANDMARKS)
    pts = normalise(np.array([LANDMARKS[n] for n in names]), box)
    return names[int(np.argmin(np.linalg.norm(pts - u, axis=1)))]


@dataclass
class SourceBody:
    """What detection needs of a source motion over F frames (world, m).

    scale: shoulder width / REFERENCE_SHOULDERS; head_origin (F, 3), head_axes (F, 3, 3)
    or None; tips {(side, finger): (F, 3)} fingertip points (distal bone tails); tip_dirs
    {(side, finger): (F, 3)} distal bone directions; palms {side: (centre (F, 3), axes
    (F, 3, 3), half (3,))}.
    """
    scale: float
    head_origin: object
    head_axes: object
    tips: dict
    tip_dirs: dict
    palms: dict


def _runs(enter, stay, shortest=MIN_RUN):
    """(start, stop) of each contact, stop exclusive, over frames (F,) bool: hysteresis,
    the `enter` frames of one run of `stay` are one contact, from the first to the last
    of them, lasting at least `shortest` frames."""
    out = []
    for a, b in posing.runs(stay):
        on = np.flatnonzero(enter[a:b])
        if len(on) and on[-1] + 1 - on[0] >= shortest:
            out.append((a + int(on[0]), a + int(on[-1]) + 1))
    return out


def _smoothed_track(x, fps, deriv=0):
    """x (F, ...) smoothed along the frames by a zero-phase local cubic fit over
    SMOOTH_SECONDS (odd window, at least 5 frames, at most F), or its time derivative
    (deriv=1: units of x per second); x itself (or np.gradient · fps) where F is too short
    for a fit. Savitzky & Golay 1964, "Smoothing and Differentiation of Data by Simplified
    Least Squares Procedures"."""
    n = len(x)
    window = min(max(5, 2 * int(round(SMOOTH_SECONDS * fps / 2)) + 1), n - 1 + n % 2)
    if window < 5:
        return x if deriv == 0 else (np.gradient(x, axis=0) * fps if n > 1 else np.zeros_like(x))
    return savgol_filter(x, window, 3, deriv=deriv, delta=1.0 / fps, axis=0, mode="interp")


def detect(body, fps, forced=(), disabled=()):
    """Contacts of a source motion (SourceBody), in frame order.

    fingertip ↔ face (the proportional face), fingertip ↔ fingertip (thumb with a finger
    of the same hand, or across the hands), fingertip ↔ the other palm, palm ↔ palm (the
    two palms facing, overlapping, their surfaces within TOUCH). Distances and relative
    speeds are read from a short zero-phase local polynomial fit of the tracks
    (_smoothed_track; the speed over each stretch the parts stay within HOLD · TOUCH, so
    the approach does not blur a short rest), so capture noise neither splits a contact
    nor makes one. A pair touches where its surfaces are within TOUCH · scale and move
    slower than SLOW · scale; its touching frames are one contact while the parts stay
    within HOLD times both between them (hysteresis), from the first to the last;
    contacts shorter than MIN_RUN frames are dropped. Each contact's gap is smoothed over
    it.
    forced: [(part_a, part_b, start, stop)] contacts the animator added (taken on those
    frames whatever the distance); disabled: [(part_a, part_b, start, stop)] detected
    contacts overlapping one of these are dropped. fps: frames per second (the ramps).
    Returns [Contact].
    """
    s = body.scale
    touch = TOUCH * s
    r_tip = FINGER_RADIUS * s
    tracks = list(body.tips.values()) + [p[0] for p in body.palms.values()]
    tracks += [body.head_origin] if body.head_origin is not None else []
    n = len(tracks[0]) if tracks else 0
    out = []
    candidates = {}   # (kind, a, b) → (distance (F,), spot_a function, spot_b function)
    if body.head_origin is not None:
        centres = np.array([c for c, _ in FACE_SOLIDS]) * s
        radii = np.array([a for _, a in FACE_SOLIDS]) * s
        box = reference_face_box(s)
        for (side, finger), tip in body.tips.items():
            q = np.einsum("fji,fj->fi", body.head_axes, tip - body.head_origin)
            d, nrm = _ellipsoid_distance(q, centres, radii)
            spot = normalise(q - d[:, None] * nrm, box)
            tip_spot = np.zeros_like(spot)
            candidates[("face", f"{finger}_{side}", None)] = (d, tip_spot, spot, q)
    tips = sorted(body.tips)
    for i, ka in enumerate(tips):
        for kb in tips[i + 1:]:
            same = ka[0] == kb[0]
            if same and "thumb" not in (ka[1], kb[1]):
                continue          # neighbouring fingers touch each other all the time
            a, b = (ka, kb) if ka[1] == "thumb" or not same else (kb, ka)
            d = np.linalg.norm(body.tips[a] - body.tips[b], axis=1) - 2 * r_tip
            toward = _unit(body.tips[b] - body.tips[a])   # a finger's spot: towards the other
            candidates[("finger", f"{a[1]}_{a[0]}", f"{b[1]}_{b[0]}")] = (
                d, toward, -toward, body.tips[b] - body.tips[a])
    for side, (c, ax, half) in body.palms.items():
        t = PALM_HALF_THICKNESS * s
        for (fside, finger), tip in body.tips.items():
            if fside == side:
                continue
            q = np.einsum("fji,fj->fi", ax, tip - c)
            inside = (np.abs(q[:, 0]) < half[0]) & (np.abs(q[:, 1]) < half[1])
            d = np.where(inside, np.abs(q[:, 2]) - t - r_tip, np.inf)
            spot = np.stack([q[:, 0] / half[0], q[:, 1] / half[1], np.sign(q[:, 2])], -1)
            toward = -ax[..., 2] * np.sign(q[:, 2])[:, None]
            candidates[("palm", f"{finger}_{fside}", f"palm_{side}")] = (d, toward, spot, q)
    if set(body.palms) == {"L", "R"}:
        (ca, axa, _ha), (cb, _axb, _hb) = body.palms["L"], body.palms["R"]
        candidates[("palm", "palm_L", "palm_R")] = (
            *_palm_palm(body.palms["L"], body.palms["R"], PALM_HALF_THICKNESS * s),
            np.einsum("fji,fj->fi", axa, cb - ca))
    ramp = max(1, int(round(RAMP_SECONDS * fps)))
    far = 2 * HOLD * touch
    for (kind, a, b), (d, spot_a, spot_b, relative) in candidates.items():
        # capture noise (a degree or two on the finger joints) moves a resting fingertip by
        # millimetres from frame to frame: distance and speed are read from the fitted
        # tracks; a distance beyond `far` (or none: off the palm) only says "apart"
        d = np.minimum(d, far)
        near = _smoothed_track(d, fps)
        # touching and resting on each other: a fingertip sweeping past the skin within
        # TOUCH is not a contact (nor is a brush, which this does not keep); the speed is
        # fitted over the frames the parts are near, not across the approach
        band = near < HOLD * touch
        speed = np.full(n, np.inf)
        for r0, r1 in posing.runs(band):
            speed[r0:r1] = np.linalg.norm(_smoothed_track(relative[r0:r1], fps, deriv=1), axis=1)
        # two palms meet in a clap at speed: their impact is the contact
        clap = a == "palm_L" and b == "palm_R"
        enter = (near < touch) & ((speed < SLOW * s) | clap)
        stay = band & ((speed < HOLD * SLOW * s) | clap)
        runs = _runs(enter, stay)
        if kind == "face":
            names = [face_region(np.median(spot_b[s0:s1], axis=0) * 1.0) for s0, s1 in runs]
        else:
            names = [b] * len(runs)
        for (s0, s1), name in zip(runs, names):
            out.append(_with_gap(Contact(kind, a, name, s0, s1, spot_a[s0:s1], spot_b[s0:s1]), d / s, fps))
        for fa, fb, s0, s1 in forced:
            if fa == a and (fb == b or (kind == "face" and fb in LANDMARKS)):
                out.append(_with_gap(Contact(kind, a, fb, s0, s1, spot_a[s0:s1], spot_b[s0:s1]), d / s, fps))
    out = [c for c in out if not any(c.part_a == a and c.part_b == b and c.start < s1 and s0 < c.stop
                                     for a, b, s0, s1 in disabled)]
    palms = [c for c in out if c.part_a == "palm_L" and c.part_b == "palm_R"]
    # where the palms meet, that contact stands for the hands': the fingers of one hand
    # touching the other come with it
    out = [c for c in out if c.kind == "face" or c in palms or _side(c.part_a) == _side(c.part_b)
           or not any(p.start < c.stop and c.start < p.stop for p in palms)]
    for c in out:
        c.weights = _blend_weights(n, [(c.start, c.stop)], ramp)
    return sorted(out, key=lambda c: (c.start, c.name))


def _with_gap(c, distance, fps):
    """Contact c with the source's own gap per frame (c.gap, ≥ 0, m of the reference adult)
    from distance (F,) (the same unit), smoothed over the run (_smoothed_track)."""
    c.gap = np.clip(_smoothed_track(distance[c.start:c.stop], fps), 0.0, None)
    return c


PLATE = 5   # samples across and along a palm


def _plate(half):
    """Sample points (P, 3) on a palm's mid-plane in its frame (half sizes (3,))."""
    u, v = np.meshgrid(np.linspace(-1, 1, PLATE), np.linspace(-1, 1, PLATE), indexing="ij")
    return np.stack([u.ravel() * half[0], v.ravel() * half[1], np.zeros(u.size)], -1)


def _palm_palm(palm_a, palm_b, thickness):
    """(distance (F,), spot on a (F, 3), spot on b (F, 3)) of two palms (centre, axes,
    half) as plates of spheres of radius `thickness`: the surfaces' least distance
    (negative inside each other) and the closest samples in box coordinates, the third
    saying which face (+ palm side, − back)."""
    (ca, axa, ha), (cb, axb, hb) = palm_a, palm_b
    pa, pb = _plate(ha), _plate(hb)
    wa = np.einsum("fij,pj->fpi", axa, pa) + ca[:, None]
    wb = np.einsum("fij,pj->fpi", axb, pb) + cb[:, None]
    d = np.linalg.norm(wa[:, :, None] - wb[:, None], axis=-1)       # (F, Pa, Pb)
    flat = d.reshape(len(d), -1).argmin(axis=1)
    i, j = np.unravel_index(flat, d.shape[1:])
    rows = np.arange(len(d))
    gap = d[rows, i, j] - 2.0 * thickness
    ab = wb[rows, j] - wa[rows, i]
    side_a = np.sign(np.sum(ab * axa[..., 2], -1) + 1e-12)
    side_b = np.sign(np.sum(-ab * axb[..., 2], -1) + 1e-12)
    spot_a = np.concatenate([pa[i, :2] / ha[:2], side_a[:, None]], -1)
    spot_b = np.concatenate([pb[j, :2] / hb[:2], side_b[:, None]], -1)
    return gap, spot_a, spot_b


# ---------------------------------------------------------------------------------------
# the target: parts of its skin and chains to move

@dataclass
class Part:
    """A piece of the target's skin that moves with one bone: bone index, vertices (V, 3)
    and triangles (T, 3) in that bone's rest frame (armature units)."""
    bone: int
    vertices: np.ndarray
    triangles: np.ndarray

    def __post_init__(self):
        # the skin of one part is cut open (at the neck, the wrist, the knuckles): each
        # hole is closed by a fan to its rim's centroid, so that the angle-weighted
        # pseudo-normal of the closest feature signs every point exactly
        self.vertices, self.triangles = capped(self.vertices, self.triangles)
        self._closed = sdf.is_closed(self.triangles)
        p = self.vertices[self.triangles]
        self._corners = p
        self._normals, self._edge_normals, self._vertex_normals = sdf.pseudo_normals(self.vertices, self.triangles)
        self._centroid_tree = cKDTree(p.mean(axis=1))
        self.box = (self.vertices.min(axis=0), self.vertices.max(axis=0))
        self.size = float(np.linalg.norm(np.ptp(self.vertices, axis=0)))

    def closest(self, points, candidates=16):
        """Closest points (k, 3) on the part's skin to points (k, 3), the outward normals
        (k, 3) of the triangles they lie on, and the signed distances (k,) (outside > 0:
        the pseudo-normal test of Bærentzen & Aanæs, "Signed distance computation using
        the angle weighted pseudonormal", IEEE TVCG 2005; the generalized winding number
        where the skin could not be closed). The nearest `candidates` triangle centroids
        are searched (FAR_CANDIDATES for points farther than NEAR · size, every triangle
        of a part with at most twice as many): exact for skin whose triangles are small
        against the distance."""
        points = np.asarray(points, dtype=float).reshape(-1, 3)
        q, t, code, d = self._nearest(points, candidates)
        far = (d > NEAR * self.size) & (d < OUTSIDE * self.size)
        if far.any() and len(self.triangles) > candidates:
            # a small part is searched whole: cheaper than finding the nearest FAR_CANDIDATES
            whole = len(self.triangles) <= 2 * FAR_CANDIDATES
            q[far], t[far], code[far], d[far] = self._nearest(points[far], len(self.triangles) if whole
                                                              else FAR_CANDIDATES)
        if self._closed:
            normal = np.where((code == sdf.FACE)[:, None], self._normals[t], 0.0)
            for e in range(3):
                normal = np.where((code == sdf.EDGE0 + e)[:, None], self._edge_normals[t, e], normal)
                normal = np.where((code == sdf.VERT0 + e)[:, None], self._vertex_normals[self.triangles[t, e]],
                                  normal)
            sign = np.where(np.sum((points - q) * normal, axis=1) < 0.0, -1.0, 1.0)
        else:
            sign = np.where(sdf.winding_number(self.vertices, self.triangles, points) > 0.5, -1.0, 1.0)
        sign[d >= OUTSIDE * self.size] = 1.0
        return q, self._normals[t], sign * d

    def _nearest(self, points, candidates):
        k = min(candidates, len(self.triangles))
        if k == len(self.triangles):      # every triangle: no search needed
            idx = np.broadcast_to(np.arange(k), (len(points), k))
        else:
            _d, idx = self._centroid_tree.query(points, k=k)
        # the nearest candidate by the compiled distance, then its closest point and
        # feature once (the same Voronoi-region formula): all candidates in numpy cost
        # seconds per clip on a dense skin
        d, t = kernels.nearest_triangles(kernels.argument(points, points.shape), self._corners,
                                         np.ascontiguousarray(idx, np.intp).reshape(-1),
                                         np.arange(0, k * len(points) + 1, k))
        tri = self._corners[t]
        q, code = sdf.closest_point_on_triangle(points, tri[:, 0], tri[:, 1], tri[:, 2])
        return q, t, code, d


NEAR = 0.1           # of a part's size: points farther than this search more triangles
FAR_CANDIDATES = 96
OUTSIDE = 0.3        # of a part's size: no point this far from its skin is inside a part


def capped(vertices, triangles):
    """(vertices, triangles) with every hole closed by a fan of triangles from its rim
    edges to the rim's centroid (a new vertex), wound like the rest of the mesh."""
    t = np.asarray(triangles, dtype=np.intp)
    directed = np.stack([t, np.roll(t, -1, axis=1)], -1).reshape(-1, 2)
    n_v = len(vertices)
    rim = directed[~np.isin(directed[:, 1] * n_v + directed[:, 0], directed[:, 0] * n_v + directed[:, 1])]
    if not len(rim):
        return np.asarray(vertices, float), t
    n = len(vertices)
    graph = coo_matrix((np.ones(len(rim)), (rim[:, 0], rim[:, 1])), shape=(n, n))
    _count, label = connected_components(graph, directed=False)
    loops = label[rim[:, 0]]
    ids, loop_of = np.unique(loops, return_inverse=True)
    centres = np.array([np.asarray(vertices)[np.unique(rim[loop_of == k])].mean(axis=0) for k in range(len(ids))])
    fan = np.stack([rim[:, 1], rim[:, 0], n + loop_of], -1)
    return np.concatenate([vertices, centres]), np.concatenate([t, fan])


class Parts:
    """Skin parts by name, each built (capped, its normals and search tree made) the first
    time a contact asks for it: parts.add(name, bone, vertices, triangles); parts.get(name)
    → Part or None."""

    def __init__(self):
        self._raw, self._built = {}, {}

    def add(self, name, bone, vertices, triangles):
        self._raw[name] = (bone, vertices, triangles)

    def get(self, name):
        if name not in self._built and name in self._raw:
            self._built[name] = Part(*self._raw[name])
        return self._built.get(name)

    def __contains__(self, name):
        return name in self._raw


@dataclass
class Target:
    """The target armature over F frames: parents (N,) (parents first in `order`), rest
    (N, 4, 4) armature-space rest matrices, world (4, 4) object matrix, basis (F, N, 4)
    local rotation quaternions, loc {bone: (F, 3)} local locations."""
    parents: np.ndarray
    rest: np.ndarray
    world: np.ndarray
    basis: np.ndarray
    loc: dict

    def at(self, frames, basis=None):
        """This target on `frames` only (k,) (with basis (k, N, 4) instead of its own)."""
        sub = Target(self.parents, self.rest, self.world,
                     (self.basis[frames] if basis is None else basis).copy(),
                     {b: v[frames] for b, v in self.loc.items()})
        # the rest relations are the same for every sub-target: made once, shared
        sub._order, sub._rel = self._relations()
        return sub

    def _relations(self):
        """(parents-first order, rest matrices relative to the parent (N, 4, 4))."""
        if not hasattr(self, "_order"):
            self._order = _parents_first(self.parents)
            self._rel = np.array([self.rest[i] if p < 0 else np.linalg.inv(self.rest[p]) @ self.rest[i]
                                  for i, p in enumerate(self.parents)])
        return self._order, self._rel

    def pose(self, bones=None):
        """Posed world matrices (F, N, 4, 4) (Blender's pose model, solver.core.kinematics),
        of `bones` and their ancestors only when given (the others left zero)."""
        F, N = self.basis.shape[:2]
        order, rel = self._relations()
        if bones is not None:
            need = set()
            for b in bones:
                while b >= 0 and b not in need:
                    need.add(b)
                    b = self.parents[b]
            order = [i for i in order if i in need]
        # local matrices of the bones posed only (a contact's chain is a few of a rig's bones)
        located = np.zeros((F, len(order), 3))
        for k, i in enumerate(order):
            if i in self.loc:
                located[:, k] = self.loc[i]
        local = kinematics.transforms(quat.to_matrix(self.basis[:, order]), located)
        return kinematics.chain(self.parents, self.rest, local, world=self.world, order=order, relative=rel)


def _parents_first(parents):
    order, seen = [], set()

    def visit(i):
        if i in seen:
            return
        if parents[i] >= 0:
            visit(parents[i])
        seen.add(i)
        order.append(i)
    for i in range(len(parents)):
        visit(i)
    return order


def chain(parents, top, bottom):
    """Bones from `top` down to `bottom` (both included), top first; [] when bottom does
    not hang from top."""
    path = [bottom]
    while path[-1] != top:
        p = parents[path[-1]]
        if p < 0:
            return []
        path.append(p)
    return path[::-1]


# ---------------------------------------------------------------------------------------
# enforcement

DAMPING = 0.02     # m: the damped least squares λ (scaled by the body size)
ITERATIONS = 40
STEP = 0.05        # of the body size: the largest goal step of one iteration
MAX_TURN = 0.1     # rad: the largest turn of one joint in one iteration
CLEARANCE_PASSES = 5


class Goal:
    """A point-to-point goal for the IK: a local point on bone a (armature units, bone
    rest frame) to meet a world point per frame, or a local point on bone b.

    joints_a, joints_b: IK joints (bone indices) moving point a (resp. b); weights: {bone:
    how freely it turns} (larger turns more)."""

    def __init__(self, bone_a, local_a, joints_a, bone_b, local_b, joints_b, weights):
        self.bone_a, self.local_a, self.joints_a = bone_a, local_a, list(joints_a)
        self.bone_b, self.local_b, self.joints_b = bone_b, local_b, list(joints_b)
        self.weights = weights


def _world_point(M, rest_inv, bone, local):
    """World points (F, 3) of bone-rest-frame points local (F, 3) on posed bone matrices
    M (F, N, 4, 4) (world): p = M_b · rest_b⁻¹ · local... local is already in the bone's
    rest frame (bone-local), so p = M_b · local."""
    return np.einsum("fij,fj->fi", M[:, bone, :3, :3], local) + M[:, bone, :3, 3]


def solve_goal(target, frames, goal, offset, size, start=None, runs=None):
    """Rotation deltas that make the goal's two points meet on `frames` (k,) indices.

    offset (k, 3) world m: point a must reach point b + offset. Damped least squares on
    the joints' world rotation vectors, weighted per joint; size (m) scales the damping.
    start (k, N, 4): the basis to start from (default: the target's on those frames).
    runs: lengths (r,) of consecutive pieces of `frames` solved as one problem each (a
    piece stops iterating once all its frames meet the goal; default: one piece), so
    that several contacts' frames are solved in one pass exactly as one by one.
    Returns {bone: (k, 4) new local quaternions} for the goal's joints.
    """
    sub = target.at(frames, start)
    # a joint moves a point only when the point's bone hangs from it
    up_a, up_b = _ancestry(target.parents, goal.bone_a), _ancestry(target.parents, goal.bone_b)
    joints_a = [j for j in goal.joints_a if j in up_a]
    joints_b = [j for j in goal.joints_b if j in up_b]
    joints = joints_a + [j for j in joints_b if j not in joints_a]
    sign = {j: (1.0 if j in joints_a else 0.0) - (1.0 if j in joints_b else 0.0) for j in joints}
    joints = [j for j in joints if sign[j] != 0.0]
    w = np.repeat([goal.weights.get(j, 1.0) for j in joints], 3)
    lam2 = (DAMPING * size) ** 2
    bones = joints + [goal.bone_a, goal.bone_b]
    lengths = np.array([len(frames)] if runs is None else runs)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    for _ in range(ITERATIONS):
        M = sub.pose(bones)
        pa = _world_point(M, None, goal.bone_a, goal.local_a)
        pb = _world_point(M, None, goal.bone_b, goal.local_b)
        e = pb + offset - pa                                           # (k, 3)
        # a piece that meets the goal is left as it is (its error no longer changes)
        active = np.repeat(np.maximum.reduceat(np.abs(e).max(axis=1), starts) >= 1e-5 * size, lengths)
        if not active.any():
            break
        # at most STEP · size per iteration: far goals are approached along the way
        # instead of by one linearised jump (Buss 2004, clamping the target distance)
        norm = np.linalg.norm(e, axis=1, keepdims=True)
        e = e * np.minimum(1.0, STEP * size / np.maximum(norm, 1e-12))
        cols = []
        for j in joints:
            p = pa if sign[j] > 0 else pb
            r = p - M[:, j, :3, 3]
            # ∂p/∂ω = −[r]×  (a rotation ω about the joint's head moves p by ω × r)
            cols.append(sign[j] * -_skew(r))
        J = np.concatenate(cols, axis=2)                               # (k, 3, 3n)
        JW = J * w
        A = JW @ np.swapaxes(J, 1, 2) + lam2 * np.eye(3)
        dw = np.einsum("fij,fj->fi", np.swapaxes(JW, 1, 2), np.linalg.solve(A, e[..., None])[..., 0])
        dw = dw.reshape(len(dw), -1, 3)
        # near a stretched arm's singularity the damped step is still large: each joint
        # turns at most MAX_TURN per iteration, all joints applied on one linearisation
        big = np.linalg.norm(dw, axis=-1, keepdims=True)
        dw = dw * np.minimum(1.0, MAX_TURN / np.maximum(big, 1e-12))
        _turn(sub, M, joints, dw, active)
    return {j: sub.basis[:, j] for j in joints}


def _ancestry(parents, bone):
    """The bone and its ancestors (set)."""
    out = set()
    while bone >= 0:
        out.add(bone)
        bone = parents[bone]
    return out


def _skew(r):
    """Cross-product matrices [r]× (k, 3, 3) of vectors r (k, 3)."""
    out = np.zeros((len(r), 3, 3))
    out[:, 0, 1], out[:, 0, 2] = -r[:, 2], r[:, 1]
    out[:, 1, 0], out[:, 1, 2] = r[:, 2], -r[:, 0]
    out[:, 2, 0], out[:, 2, 1] = -r[:, 1], r[:, 0]
    return out


def _turn(target, M, joints, omega, rows):
    """Turn bones `joints` (n,) (each with its subtree) by the world rotation vectors omega
    (k, n, 3) about their heads, all on the one pose M: R(q') = A⁻¹ · Rot(ω) · A · R(q),
    with A a bone's posed world rotation without its own basis rotation; on the frames
    where rows (k,) bool is True only."""
    Rq = quat.to_matrix(target.basis[:, joints])                       # (k, n, 3, 3)
    A = _rot(M[:, joints]) @ np.swapaxes(Rq, -1, -2)
    rot = quat.to_matrix(quat.exp(omega))
    new = np.swapaxes(A, -1, -2) @ rot @ A @ Rq
    q = quat.normalize(quat.from_matrix(new))
    old = target.basis[:, joints]
    q = np.where(np.sum(q * old, -1, keepdims=True) < 0, -q, q)
    target.basis[:, joints] = np.where(rows[:, None, None], q, old)


@dataclass
class TargetBody:
    """The target's side of every contact.

    parts: Parts ("face", "palm_L", "palm_R", "<finger>_<side>" distal skins);
    face_box: (lo, hi) (3,) of the face skin in the head's anatomical frame and
    face_axes (3, 3): that frame's axes (columns left, forward, up) in the head bone's
    rest frame (armature units); palms: {side: (centre (3,), axes (3, 3), half (3,))} in
    the hand bone's rest frame; arms: {side: [bones]} upper arm to hand; fingers:
    {part name: [bones]} first phalanx (or metacarpal) to the distal one; weights: {bone:
    how freely the IK turns it}; size: shoulder width (m); skins: {part name: Skin} the
    deforming skin of a finger's last two phalanges (what a finger contact is measured on).
    """
    parts: dict
    face_box: object
    face_axes: object
    palms: dict
    arms: dict
    fingers: dict
    weights: dict
    size: float
    skins: dict = field(default_factory=dict)


@dataclass
class Skin:
    """A piece of skin deformed by linear blend skinning (as Blender's Armature modifier):
    rest vertices (V, 3) in armature space, bones (V, K) and weights (V, K) (summing to 1
    per vertex), triangles (T, 3)."""
    vertices: np.ndarray
    bones: np.ndarray
    weights: np.ndarray
    triangles: np.ndarray

    def deformed(self, M, rest):
        """World vertices (F, V, 3) at posed world matrices M (F, N, 4, 4) of a skeleton
        whose armature-space rest matrices are rest (N, 4, 4)."""
        skin = M[:, self.bones] @ np.linalg.inv(rest[self.bones])           # (F, V, K, 4, 4)
        p = np.einsum("fvkij,vj->fvki", skin[..., :3, :3], self.vertices) + skin[..., :3, 3]
        return np.einsum("fvki,vk->fvi", p, self.weights)


def _skin_clearance(target, skin_a, skin_b):
    """Per frame of target (Target over k frames) the least signed distance (k,) of skin
    a's deformed vertices to skin b's deformed surface (world units)."""
    bones = sorted(set(skin_a.bones.ravel()) | set(skin_b.bones.ravel()))
    M = target.pose(bones)
    va, vb = skin_a.deformed(M, target.rest), skin_b.deformed(M, target.rest)
    return np.array([Part(0, vb[f], skin_b.triangles).closest(va[f])[2].min() for f in range(len(M))])


def _side(part):
    return part.rsplit("_", 1)[1]


def _joints(body, kind, a, b):
    """(joints moving part a, joints moving part b) of a contact."""
    def moving(part):
        if part.startswith("palm"):
            return body.arms.get(_side(part), [])
        return body.arms.get(_side(part), []) + body.fingers.get(part, [])
    if kind == "face":
        return moving(a), []
    if kind == "finger" and _side(a) == _side(b):
        return body.fingers.get(a, []), body.fingers.get(b, [])
    return moving(a), moving(b)


def _palm_point(body, side, u):
    """A point (3,) in the hand bone's rest frame on the palm's box at box coordinates u
    (3,) (across, along in [−1, 1], the sign of the third: palm side +, back −), pushed
    out past the skin so that its closest skin point lies on that face."""
    c, ax, half = body.palms[side]
    reach = max(half[:2]) * 1.5
    return c + ax[:, 0] * u[0] * half[0] + ax[:, 1] * u[1] * half[1] + ax[:, 2] * np.sign(u[2] or 1.0) * reach


def _affine_inverse(M):
    """Inverses (k, 4, 4) of affine matrices M (k, 4, 4) (last row 0 0 0 1): the linear
    part's by its adjugate (rows: cross products of its columns over the determinant),
    which costs a fraction of a general inverse on many small matrices."""
    a = M[:, :3, :3]
    c0, c1, c2 = a[..., 0], a[..., 1], a[..., 2]
    adj = np.stack([np.cross(c1, c2), np.cross(c2, c0), np.cross(c0, c1)], axis=1)   # rows
    inv = adj / np.einsum("ki,ki->k", c0, adj[:, 0])[:, None, None]
    out = np.zeros_like(M)
    out[:, :3, :3] = inv
    out[:, :3, 3] = -np.einsum("kij,kj->ki", inv, M[:, :3, 3])
    out[:, 3, 3] = 1.0
    return out


def _local(M, bone, world):
    """World points (k, 3) into bone frames M[:, bone] (k frames)."""
    inv = _affine_inverse(M[:, bone])
    return np.einsum("fij,fj->fi", inv[:, :3, :3], world) + inv[:, :3, 3]


def _scale(M, bone):
    return np.linalg.norm(M[:, bone, :3, 0], axis=-1)


PATCH = 0.001   # m: skin of part a this close to its deepest point is the contact patch


COARSE = 400   # vertices of part a the passes look at (the final measure: all of them)


SCOUTS = 32    # vertices of part a per frame (the nearest to b's box) that bound the least distance


def _clearance(M, part_a, part_b, coarse=False, depth_only=False):
    """Per frame: the least signed distance (k,) m of part a's vertices to part b's skin,
    the contact point (k, 3) world (the mean of b's skin points nearest to a's vertices
    within PATCH of that least distance: the middle of the touching patch) and the
    index (k,) of a's deepest vertex; with depth_only, (the least signed distance where
    it is negative, else 0 (k,), None, None): only vertices inside b's box are measured.

    Only the vertices that can matter are measured: a point outside b's bounding box is
    outside b, farther from its skin than from the box, so a vertex whose box distance
    exceeds the least distance (its size) of the SCOUTS vertices nearest to the box, plus
    PATCH, is neither the deepest nor in the patch; for the depth alone, vertices more than
    PATCH outside the box are not measured."""
    k = len(M)
    va = part_a.vertices
    if coarse and len(va) > COARSE:
        va = va[:: -(-len(va) // COARSE)]
    world = np.einsum("fij,vj->fvi", M[:, part_a.bone, :3, :3], va) + M[:, part_a.bone, None, :3, 3]
    inv = _affine_inverse(M[:, part_b.bone])
    local = np.einsum("fij,fvj->fvi", inv[:, :3, :3], world) + inv[:, None, :3, 3]      # (k, V, 3)
    scale = _scale(M, part_b.bone)[:, None]
    lo, hi = part_b.box
    box = np.linalg.norm(np.maximum(np.maximum(lo - local, local - hi), 0.0), axis=-1)     # (k, V)
    if depth_only:
        keep = box <= PATCH / scale
    else:
        # the scouts are kept: a sign test next to an open or thin skin can call a point
        # just outside the box inside, and the bound then counts in either direction
        rows = np.arange(k)[:, None]
        scouts = np.argsort(box, axis=1, kind="stable")[:, :SCOUTS]
        bound = part_b.closest(local[rows, scouts].reshape(-1, 3))[2].reshape(k, -1).min(axis=1)
        keep = box <= np.abs(bound)[:, None] + PATCH / scale
        keep[rows, scouts] = True
    sd = np.full(box.shape, np.inf)
    q = np.zeros(local.shape)
    if keep.any():
        q[keep], _n, sd[keep] = part_b.closest(local[keep])
    sd = sd * scale
    if depth_only:
        return np.minimum(sd.min(axis=1), 0.0), None, None
    q = np.einsum("fij,fvj->fvi", M[:, part_b.bone, :3, :3], q) + M[:, part_b.bone, None, :3, 3]
    j = np.argmin(sd, axis=1)
    rows = np.arange(k)
    least = sd[rows, j]
    patch = sd <= least[:, None] + PATCH
    point = np.sum(q * patch[..., None], axis=1) / patch.sum(axis=1, keepdims=True)
    return least, point, j


def enforce(target, body, contacts, fps):
    """Target basis rotations (F, N, 4) with every enabled contact kept, and per contact
    its measured values ({"gap_mm", "penetration_mm", "spot_error_mm"} over its run:
    skin clearance by signed distance, and the distance from the middle of the touching
    patch to the transferred spot on part b), stored in Contact.measured.

    Contacts of one pair are solved together: on each run the IK correction (a rotation
    per joint, relative to the pose before), between runs less than two ramps apart the
    correction goes smoothly from one run's to the next (a clap's palms are not released
    between claps), elsewhere it eases in and out over RAMP_SECONDS (smootherstep).
    target: Target (its basis is not modified; world in metres: the object matrix times
    the scene's unit scale); body: TargetBody; contacts: [Contact] from detect; fps:
    frames per second. The solve does not depend on the target's size: it runs on the
    target scaled to REFERENCE_SHOULDERS (its tolerances are the reference adult's) and
    its measures are the world's (mm). A contact whose parts the target lacks is left
    out and measured as {"skipped": reason}.
    """
    # solved on the body scaled to the reference adult's shoulders, so that the same
    # character in centimetres, or with an object scale, moves alike: every tolerance
    # below is the reference adult's; the measures are given back in the world's metres
    k = body.size / REFERENCE_SHOULDERS
    world = target.world.copy()
    world[:3] /= k
    out = Target(target.parents, target.rest, world, target.basis.copy(), target.loc)
    body = replace(body, size=REFERENCE_SHOULDERS)
    ramp = max(1, int(round(RAMP_SECONDS * fps)))
    groups = {}
    for c in contacts:
        if c.enabled:
            groups.setdefault(c.name, []).append(c)
    for group in groups.values():
        solved = _solve_contacts(out, body, group)
        runs = [(c, sol) for c, sol in zip(group, solved) if sol]
        if not runs:
            continue
        plain = out.basis.copy()
        measures = {}
        # a run not reachable on this body (out of reach, or only through its own skin)
        # is left as retargeted, and says why; the others are blended again without it
        while runs:
            for j in sorted({j for _c, sol in runs for j in sol}):
                out.basis[:, j] = _blend(plain[:, j], [(c.start, c.stop, sol.get(j)) for c, sol in runs], ramp)
            weights = _blend_weights(len(plain), [(c.start, c.stop) for c, _s in runs], ramp)
            for c, _sol in runs:
                c.weights = weights
            _measure(out, body, plain, [c for c, _sol in runs], ramp, measures)
            missed = [(c, sol) for c, sol in runs if _miss(c.measured)]
            if not missed:
                _measure(out, body, plain, [c for c, _sol in runs], ramp, measures, eased=True)
                break
            out.basis[:] = plain
            for c, _sol in missed:
                m = {key: k * v for key, v in c.measured.items()}
                c.measured = {"skipped": _skip_reason(m, k)}
            runs = [r for r in runs if not any(r[0] is c for c, _s in missed)]
    for c in contacts:
        if "skipped" not in c.measured:
            c.measured = {key: k * v for key, v in c.measured.items()}
        for scratch in ("parts_",):
            if hasattr(c, scratch):
                delattr(c, scratch)
    return out.basis


INSIDE_WARN_MM = 5.0   # mm (reference adult): a hand deeper than this in the target's own head is reported


NEAR_FACE = 0.05   # m (reference adult): a rigid palm farther than this from the face's box is not inside
CHUNK = 32         # frames of deformed skin evaluated at once
CHECK_VERTICES = 200   # at most this many of a palm's skin vertices are checked


def hands_in_face(target, body):
    """{"L"/"R": depth (F,) m ≥ 0}: per frame of target (Target, world metres) how deep the
    skin of each palm is inside the face skin: the palm's deforming skin (body.skins
    "palm_<side>", linear blend skinning) where the target has one, else its rigid part
    ("palm_<side>"); the depth is the least signed distance of its vertices to the face
    (Part.closest), for the sides whose palm and face the target has. A retarget whose
    proportions put the hand through the character's own head (a large head, short
    arms) shows here; no contact of the source puts it there."""
    face = body.parts.get("face")
    out = {}
    if face is None:
        return out
    for side in ("L", "R"):
        palm, skin = body.parts.get(f"palm_{side}"), body.skins.get(f"palm_{side}")
        if palm is None:
            continue
        M = target.pose([palm.bone, face.bone])
        if skin is None:
            out[side] = -_clearance(M, palm, face, depth_only=True)[0]
            continue
        # the deforming skin only where the rigid palm comes near the face's box
        world = np.einsum("fij,vj->fvi", M[:, palm.bone, :3, :3], palm.vertices) + M[:, palm.bone, None, :3, 3]
        local = np.einsum("fij,fvj->fvi", (inv := _affine_inverse(M[:, face.bone]))[:, :3, :3], world) \
            + inv[:, None, :3, 3]
        lo, hi = face.box
        box = np.linalg.norm(np.maximum(np.maximum(lo - local, local - hi), 0.0), axis=-1).min(axis=1)
        near = np.flatnonzero(box * _scale(M, face.bone) < NEAR_FACE * body.size / REFERENCE_SHOULDERS)
        depth = np.zeros(len(M))
        bones = sorted(set(skin.bones.ravel().tolist()) | {face.bone})
        # every few of a dense palm's vertices: the depths worth a warning are far larger
        # than their spacing
        every = slice(None, None, -(-len(skin.vertices) // CHECK_VERTICES))
        part = Skin(skin.vertices[every], skin.bones[every], skin.weights[every], skin.triangles[:0])
        for k in range(0, len(near), CHUNK):
            frames = near[k:k + CHUNK]
            Mc = target.at(frames).pose(bones)
            inv = _affine_inverse(Mc[:, face.bone])
            q = np.einsum("fij,fvj->fvi", inv[:, :3, :3], part.deformed(Mc, target.rest)) + inv[:, None, :3, 3]
            q = q.reshape(-1, 3)
            # no point outside the face's bounding box is inside it (away from the skin
            # the sign of the nearest candidate triangle is not to be trusted)
            sd = np.zeros(len(q))
            inside = np.flatnonzero(np.all((q >= lo) & (q <= hi), axis=1))
            sd[inside] = face.closest(q[inside])[2]
            sd = sd.reshape(len(frames), -1) * _scale(Mc, face.bone)[:, None]
            depth[frames] = np.maximum(-sd.min(axis=1), 0.0)
        out[side] = depth
    return out


def _skip_reason(m, k):
    """Why a contact with measures m (world mm; k: the body's size over the reference
    adult's) is not kept, and where the plain retarget leaves it."""
    if deeper_than_plain(m, k):
        why = (f"keeping it pushes the parts {m['penetration_mm']:.1f} mm into each other "
               f"(the plain retarget: {m['plain_penetration_mm']:.1f} mm)")
    else:
        why = (f"the best correction found ends {m['gap_mm']:.1f} mm from the skin "
               f"(at most {MISS['gap_mm'] * k:.1f} mm kept)")
    return (f"{why}; left as retargeted (on its frames at most {m['plain_gap_mm']:.1f} mm apart "
            f"and at most {m['plain_penetration_mm']:.1f} mm inside)")


MISS = {"gap_mm": 2.0, "penetration_mm": 1.0}   # what a kept contact must meet (mm, reference adult)
SPOT_WARN_MM = 5.0   # mm (reference adult): a kept contact farther off its spot is reported


DEEPER_MM = 0.2   # mm (reference adult): how much deeper than the plain pose a kept contact may go


def deeper_than_plain(measured, scale=1.0, eased=False):
    """True when a contact's measures (mm, as enforce stores them; scale: the body's size
    over the reference adult's) go deeper into the skin than MISS allows and than the
    plain retarget's own penetration plus DEEPER_MM: on the contact's frames, or with
    eased on every frame its correction reaches."""
    key = "eased_penetration_mm" if eased else "penetration_mm"
    allowed = max(MISS["penetration_mm"] * scale, measured[f"plain_{key}"] + DEEPER_MM * scale)
    return measured[key] > allowed


def _miss(measured):
    """True when a contact is not met: its gap beyond MISS's, or deeper_than_plain."""
    return measured["gap_mm"] > MISS["gap_mm"] or deeper_than_plain(measured)


def _solve_contacts(out, body, group):
    """[{joint: (stop − start, 4) basis quaternions} meeting each contact of group (one
    pair's contacts) on its run, or {} (its measured says why)], all runs solved in one
    pass: each run is its own problem (its own held point, smoothing and convergence)."""
    c0 = group[0]
    part_b_name = "face" if c0.kind == "face" else c0.part_b
    pa, pb = body.parts.get(c0.part_a), body.parts.get(part_b_name)
    ja, jb = _joints(body, c0.kind, c0.part_a, part_b_name)
    if pa is None or pb is None or not (ja or jb):
        # say which part is missing: a rig without finger bones has no finger to touch with
        missing = [n for n, p in ((c0.part_a, pa), (part_b_name, pb)) if p is None]
        reason = (f"the target has no {' and no '.join(missing)} (no bone or skin for it)" if missing
                  else f"the target has no arm or finger chain moving {c0.part_a} or {part_b_name}")
        for c in group:
            c.measured = {"skipped": reason}
        return [{} for _c in group]
    lengths = [c.stop - c.start for c in group]
    pieces = [slice(s0, s0 + n) for s0, n in zip(np.cumsum([0] + lengths[:-1]), lengths)]
    frames = np.concatenate([np.arange(c.start, c.stop) for c in group])
    bones = [pa.bone, pb.bone] + ja + jb
    M = out.at(frames).pose(bones)
    spots = [_spots_b(body, c, pb, M[piece], pa) for c, piece in zip(group, pieces)]
    spot_b, normal_b = (np.concatenate([sp[i] for sp in spots]) for i in (0, 1))
    n_world = _unit(np.einsum("fij,fj->fi", _rot(M[:, pb.bone]), normal_b))
    goal = Goal(pa.bone, _lowest(pa, M, n_world), ja, pb.bone, spot_b, jb, body.weights)
    # the source's own approach: a fingertip still arriving stays as far from the skin
    # as it is in the source (at most KEEP_GAP), so it settles as the source's does
    keep = np.minimum(np.concatenate([getattr(c, "gap", np.zeros(n)) for c, n in zip(group, lengths)]), KEEP_GAP)
    offset = keep[:, None] * n_world
    trial = None
    for k in range(CLEARANCE_PASSES):
        solved = solve_goal(out, frames, goal, offset, body.size, trial, lengths)
        trial = out.basis[frames].copy()
        for j, q in solved.items():
            trial[:, j] = q
        Mt = out.at(frames, trial).pose(bones)
        # a's skin lowest along b's normal goes to the spot (on a plane there, no other
        # point of a is then inside b), then a is lifted along the normal until none is
        # inside b's curved skin either
        if k < 2:
            low = _lowest(pa, Mt, n_world)
            # a fingertip touches with one spot of its pad; a palm meets the other hand
            # wherever it is lowest at that frame
            goal.local_a = low if c0.part_a.startswith("palm") else \
                np.concatenate([_held_point(low[piece]) for piece in pieces])
        else:
            sd = _clearance(Mt, pa, pb, coarse=True)[0]
            offset = offset - (sd - keep)[:, None] * n_world
        # the arm is redundant: frames solved apart may settle on different elbows;
        # the corrections are smoothed over the run and solved again from there, so
        # neighbouring frames take neighbouring solutions
        plain = out.basis[frames]
        trial = np.concatenate([_smoothed(plain[piece], trial[piece], list(solved)) for piece in pieces])
    solved = solve_goal(out, frames, goal, offset, body.size, trial, lengths)
    for c, piece in zip(group, pieces):
        c.target_spots, c.bones, c.parts_ = (pb.bone, spot_b[piece]), (pa.bone, pb.bone), (pa, pb, bones)
    return [{j: q[piece] for j, q in solved.items()} for piece in pieces]


def _held_point(points):
    """One point of a part for the whole run (k, 3): the median of its per-frame points,
    so that the same spot of the finger touches, however the finger turns."""
    return np.repeat(np.median(points, axis=0)[None], len(points), 0)


KEEP_GAP = 0.0005       # m: the largest source gap kept on a contact's frames
SMOOTH_FRAMES = 1.5   # σ of the Gaussian smoothing the corrections over a run (frames)
BLEND_SMOOTH_FRAMES = 1.5   # σ of the one smoothing the blended correction (frames)


def _smoothed(plain, solved, joints):
    """solved (k, N, 4) with each joint's correction relative to plain (k, N, 4), as a
    rotation vector, smoothed over the k frames (Gaussian, σ = SMOOTH_FRAMES)."""
    out = solved.copy()
    for j in joints:
        rv = quat.log(quat.conj_mul(plain[:, j], solved[:, j]))
        rv = gaussian_filter1d(rv, SMOOTH_FRAMES, axis=0, mode="nearest")
        out[:, j] = quat.mul(plain[:, j], quat.exp(rv))
    return out


def _measure(out, body, plain, contacts, ramp, cache, eased=False):
    """c.measured of each contact c of one pair: on c's run the skin gap, the penetration
    and the spot error (mm) and the gap and penetration of the plain pose (basis plain
    (F, N, 4)); with eased, also the deepest penetration on every frame the correction
    reaches (eased_penetration_mm: its ramps too) and the plain pose's there (only the
    contacts kept need it: it decides a warning, not whether a contact is kept). Each
    frame's measures are kept in cache ({}, one per pair) with the pose they were taken
    on: a frame whose pose a later pass (or the plain pose) repeats is not measured again."""
    pa, pb, bones = contacts[0].parts_
    runs = [np.arange(c.start, c.stop) for c in contacts]
    nears = []
    for c in contacts:
        near = np.arange(max(0, c.start - ramp), min(len(plain), c.stop + ramp))
        nears.append(near[c.weights[near] > 0])
    c0 = contacts[0]
    skins = [body.skins.get(n) for n in (c0.part_a, c0.part_b)] if c0.kind == "finger" else [None]
    on_skin = all(sk is not None for sk in skins)

    def on_run(sub):
        """(least signed distance, touching patch's middle, the spot's bone matrix) per frame."""
        M = sub.pose(bones)
        sd, patch, _i = _clearance(M, pa, pb)
        if on_skin:
            # two fingers: measured on their deforming skin (a rigid pad can be millimetres
            # off where the skin bends with the middle phalanx)
            sd = _skin_clearance(sub, *skins)
        return sd, patch, M[:, pb.bone]

    def on_ramp(sub):
        # on the ramps only the depth counts (eased_penetration_mm)
        return (_skin_clearance(sub, *skins) if on_skin else
                _clearance(sub.pose(bones), pa, pb, depth_only=True)[0]),

    def measured(kind, frames, basis):
        keys = [(kind, f, basis[f].tobytes()) for f in frames.tolist()]
        new = np.array([f for f, key in zip(frames.tolist(), keys) if key not in cache], dtype=int)
        if len(new):
            values = (on_run if kind == "run" else on_ramp)(out.at(new, basis[new]))
            for f, v in zip(new.tolist(), zip(*values)):
                cache[(kind, f, basis[f].tobytes())] = v
        return [np.array(x) for x in zip(*(cache[key] for key in keys))]
    for c, run, near in zip(contacts, runs, nears):
        sd, patch, Mb = measured("run", run, out.basis)
        plain_run = measured("run", run, plain)[0]
        spot = np.einsum("fij,fj->fi", Mb[:, :3, :3], c.target_spots[1]) + Mb[:, :3, 3]
        c.measured = {"gap_mm": float(1e3 * max(sd.max(), 0.0)),
                      "penetration_mm": float(1e3 * max(-sd.min(), 0.0)),
                      "spot_error_mm": float(1e3 * np.linalg.norm(patch - spot, axis=1).max()),
                      "plain_gap_mm": float(1e3 * max(plain_run.max(), 0.0)),
                      "plain_penetration_mm": float(1e3 * max(-plain_run.min(), 0.0))}
        if eased:
            (sd_near,), (plain_near,) = measured("near", near, out.basis), measured("near", near, plain)
            c.measured.update(eased_penetration_mm=float(1e3 * max(-sd_near.min(), 0.0)),
                              plain_eased_penetration_mm=float(1e3 * max(-plain_near.min(), 0.0)))


def _smootherstep(t):
    t = np.clip(t, 0.0, 1.0)
    return t * t * t * (t * (6.0 * t - 15.0) + 10.0)


def _bridges(runs, ramp):
    """Indices i where run i and run i + 1 are less than two ramps apart."""
    return {i for i in range(len(runs) - 1) if runs[i + 1][0] - runs[i][1] <= 2 * ramp}


def _blend(plain, runs, ramp):
    """One bone's basis quaternions (F, 4): plain (F, 4) times the correction: on each run
    (start, stop, solved (stop − start, 4) or None: not moved) the solved one; between
    runs at most two ramps apart the correction interpolated (slerp, smootherstep);
    elsewhere faded in and out over `ramp` frames."""
    n = len(plain)
    ident = np.array([1.0, 0.0, 0.0, 0.0])
    deltas = [quat.conj_mul(plain[s0:s1], sol) if sol is not None else np.tile(ident, (s1 - s0, 1))
              for s0, s1, sol in runs]
    delta = np.tile(ident, (n, 1))
    bridged = _bridges(runs, ramp)
    for i, ((s0, s1, _sol), d) in enumerate(zip(runs, deltas)):
        delta[s0:s1] = d
        if i in bridged:
            n0, _n1, _ = runs[i + 1]
            t = _smootherstep((np.arange(s1, n0) - (s1 - 1)) / (n0 - (s1 - 1)))
            delta[s1:n0] = quat.slerp(np.repeat(d[-1:], n0 - s1, 0), np.repeat(deltas[i + 1][:1], n0 - s1, 0), t)
        else:
            f = np.arange(s1, min(n, s1 + ramp))
            w = _smootherstep(1.0 - (f - (s1 - 1)) / (ramp + 1.0))
            delta[f] = quat.exp(w[:, None] * quat.log(np.repeat(d[-1:], len(f), 0)))
        if i - 1 not in bridged:
            f = np.arange(max(0, s0 - ramp), s0)
            w = _smootherstep(1.0 - (s0 - f) / (ramp + 1.0))
            delta[f] = quat.exp(w[:, None] * quat.log(np.repeat(d[:1], len(f), 0)))
    # where a run's correction meets its ramp the correction's rate changes at once:
    # smoothing the whole track (as rotation vectors) takes the kink out of the jerk
    rv = gaussian_filter1d(quat.log(delta), BLEND_SMOOTH_FRAMES, axis=0, mode="nearest")
    out = quat.mul(plain, quat.exp(rv))
    return np.where(np.sum(out * plain, -1, keepdims=True) < 0, -out, out)


def _blend_weights(n, runs, ramp):
    """The correction's weight (n,) in [0, 1] as _blend applies it (1 on runs and bridges,
    smoothed alike; 0 where the correction does not reach)."""
    w = np.zeros(n)
    bridged = _bridges([(a, b, None) for a, b in runs], ramp)
    for i, (s0, s1) in enumerate(runs):
        w[s0:s1] = 1.0
        if i in bridged:
            w[s1:runs[i + 1][0]] = 1.0
        else:
            f = np.arange(s1, min(n, s1 + ramp))
            w[f] = np.maximum(w[f], _smootherstep(1.0 - (f - (s1 - 1)) / (ramp + 1.0)))
        if i - 1 not in bridged:
            f = np.arange(max(0, s0 - ramp), s0)
            w[f] = np.maximum(w[f], _smootherstep(1.0 - (s0 - f) / (ramp + 1.0)))
    w = gaussian_filter1d(w, BLEND_SMOOTH_FRAMES, mode="nearest")
    return np.where(w > 1e-6, w, 0.0)


def _lowest(part, M, normal):
    """Per frame the point (k, 3) of part (its bone's rest frame) lowest along the world
    direction normal (k, 3) at poses M (k, N, 4, 4): the soft minimum of its vertices'
    heights (weights exp(−(h − h_min)/PATCH)), which moves smoothly as the part turns
    where the lowest vertex would jump from one vertex to the next."""
    scale = np.linalg.norm(M[:, part.bone, :3, 0], axis=-1)
    h = np.einsum("fji,fj->fi", _rot(M[:, part.bone]), normal) @ part.vertices.T * scale[:, None]
    w = np.exp(-(h - h.min(axis=1, keepdims=True)) / PATCH)
    return (w @ part.vertices) / w.sum(axis=1, keepdims=True)


def _support(part, direction):
    """The vertex (3,) of part farthest along direction (3,) (its bone's rest frame)."""
    return part.vertices[int(np.argmax(part.vertices @ _unit(direction)))]


def _spots_b(body, c, pb, M, pa):
    """The spot on part b (k, 3) in its bone's rest frame and the skin normal there.

    On a face or a palm with a frame (a hand with finger bases) the transferred spot; on
    a finger pad, or a palm without a frame (a rig without fingers), the vertex of b's
    skin facing the middle of a's skin at the run's middle."""
    k = c.stop - c.start
    if c.kind == "face":
        lo, hi = body.face_box
        p = denormalise(c.spot_b, (lo, hi)) @ body.face_axes.T
        return pb.closest(p)[:2]
    if c.part_b.startswith("palm") and _side(c.part_b) in body.palms:
        side = _side(c.part_b)
        pts = np.array([_palm_point(body, side, u) for u in c.spot_b])
        return pb.closest(pts)[:2]
    # the vertex of b facing the middle of a's skin at the run's middle
    mid = k // 2
    a_world = M[mid, pa.bone, :3, :3] @ pa.vertices.mean(axis=0) + M[mid, pa.bone, :3, 3]
    spot = _support(pb, _local(M[mid:mid + 1], pb.bone, a_world[None])[0] - pb.vertices.mean(axis=0))
    return pb.closest(np.repeat(spot[None], k, 0))[:2]
