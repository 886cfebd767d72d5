"""Body volumes for contact, built from a character's own skin: face, torso, palms.

Each volume is a distance field (sdf.DistanceGrid) attached to one bone's frame (or to
the kinematic base, bone −1) and a set of sample spheres on the simulated bones that may
touch it. The skin arrives as plain arrays — vertex positions in the armature's rest
pose (m) and each vertex's owning bone — so everything here is pure geometry:

- face / torso: the skin triangles whose corners all belong to the head-and-neck (resp.
  spine) bones, expressed in the head (resp. chest) frame; the cut at the neck and arms
  leaves holes, which the winding-number sign of sdf.mesh_signed_distance tolerates;
- palm: the skin the hand (and metacarpal) bones own, in the hand's frame (a box over
  the knuckles without skin: palm_box), so that a fist's fingertips rest on the palm's
  surface instead of inside one fat capsule;
- the hand itself, as seen by the other volumes: layers of spheres filling the palm
  (plate_samples), not one fat capsule.

Samples that already touch a volume in the rest pose (a proximal phalanx rooted in the
palm, a shoulder in the torso) are left out, as contacts.rest_filtered_pairs does for
capsule pairs: they would push the skeleton out of its own rest pose.
"""

from dataclasses import dataclass

import numpy as np
from scipy.spatial import ConvexHull

from . import kinematics, quat

FACE, TORSO = "face", "torso"
FIELD_CONTACT_KIND = {FACE: "hand–face", TORSO: "hand–torso"}
SAMPLE_SPACING = 1.0  # sample spheres at most this many radii apart along a capsule axis


@dataclass(frozen=True, eq=False)
class BodyMesh:
    """A body volume's surface: kind ("face", "torso" or "palm.<side>"), bone (model
    index of the bone it moves with, −1 for the kinematic base), side (None, "L" or "R"),
    vertices (V, 3) m in that bone's rest frame, triangles (T, 3) int."""

    kind: str
    bone: int
    side: object
    vertices: np.ndarray
    triangles: np.ndarray


def submesh(vertices, triangles, keep):
    """The triangles (T, 3) whose three corners are kept (keep (V,) bool), with unused
    vertices dropped and zero-area triangles removed. Returns (vertices (V', 3), triangles (T', 3))."""
    t = np.asarray(triangles, dtype=np.intp)
    t = t[np.all(np.asarray(keep, bool)[t], axis=1)]
    v = np.asarray(vertices, dtype=float)
    if len(t):
        p = v[t]
        t = t[np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1) > 1e-14]
    used, inverse = np.unique(t, return_inverse=True)
    return v[used], inverse.reshape(-1, 3)


def convex_hull_mesh(points):
    """Closed, outward-wound convex hull of points (k, 3) m: (vertices (V, 3), triangles (T, 3)).

    scipy.spatial.ConvexHull (Qhull); each facet is flipped to face away from the centroid.
    Raises ValueError for fewer than 4 points or points in a plane (scipy's QhullError).
    """
    p = np.asarray(points, dtype=float).reshape(-1, 3)
    if len(p) < 4:
        raise ValueError("a convex hull needs at least 4 points")
    try:
        hull = ConvexHull(p)
    except Exception as ex:  # scipy.spatial.QhullError: flat or degenerate input
        raise ValueError(f"no convex hull of these points: {ex}") from None
    t = hull.simplices.copy()
    a, b, c = p[t[:, 0]], p[t[:, 1]], p[t[:, 2]]
    outward = np.sum(np.cross(b - a, c - a) * (a - p[hull.vertices].mean(axis=0)), axis=1) > 0
    t[~outward] = t[~outward][:, ::-1]
    return submesh(p, t, np.ones(len(p), bool))


def box_mesh(lo, hi):
    """Closed, outward-wound box (8 vertices, 12 triangles) between corners lo, hi (3,) m."""
    corners = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], float)
    v = np.asarray(lo, float) + corners * (np.asarray(hi, float) - np.asarray(lo, float))
    return convex_hull_mesh(v)


PLATE_MAX_RADIUS = 0.01  # m: thicker palms get several layers of spheres this size or smaller


def palm_box(knuckles, palm_normal, skin=None, half_thickness=0.012, percentile=2.0):
    """The palm as a box in the hand bone's frame (origin at the wrist, +Y to the fingers).

    knuckles (k ≥ 2, 3) m: the finger bases (thumb excluded); palm_normal (3,): towards
    the palm side. The box spans the knuckle line (padded by half the mean knuckle gap)
    and the wrist-to-knuckle length; across the palm it covers the skin points (m, 3) m
    lying over that footprint (between the percentile and 100 − percentile, robust to
    the thenar and hypothenar folds), or ±half_thickness (m) about the knuckles without
    skin. A box, not the hull of the hand's skin: fingers curling into it meet its palm
    face, whose normal their own curl can resolve. Returns (vertices (8, 3), triangles (12, 3)).
    Raises ValueError for fewer than two knuckles.
    """
    k = np.asarray(knuckles, dtype=float).reshape(-1, 3)
    if len(k) < 2:
        raise ValueError("a palm box needs at least two knuckles")
    y = np.array([0.0, 1.0, 0.0])
    n = np.asarray(palm_normal, dtype=float)
    n = n - (n @ y) * y
    n /= np.linalg.norm(n)
    a = np.cross(y, n)
    frame = np.stack([a, y, n])  # rows: knuckle line, hand axis, palm normal
    kl = k @ frame.T
    order = np.sort(kl[:, 0])
    pad = 0.5 * float(np.mean(np.diff(order))) if len(order) > 1 else 0.0
    lo = np.array([order[0] - pad, 0.0, kl[:, 2].mean() - half_thickness])
    hi = np.array([order[-1] + pad, kl[:, 1].max(), kl[:, 2].mean() + half_thickness])
    if skin is not None and len(skin):
        sl = np.asarray(skin, dtype=float).reshape(-1, 3) @ frame.T
        over = (sl[:, 0] >= lo[0]) & (sl[:, 0] <= hi[0]) & (sl[:, 1] >= lo[1]) & (sl[:, 1] <= hi[1])
        if np.count_nonzero(over) >= 4:
            lo[2], hi[2] = np.percentile(sl[over, 2], [percentile, 100.0 - percentile])
    v, t = box_mesh(lo, hi)
    return v @ frame, t


def plate_samples(vertices, spacing_radii=SAMPLE_SPACING, max_radius=PLATE_MAX_RADIUS):
    """Spheres filling a flat volume (vertices (V, 3) m, its own frame).

    The thin direction is the principal axis of least extent, of thickness t; the
    spheres lie in L = ⌈t / 2 max_radius⌉ layers of radius r = t / 2L that stack to the
    full thickness, on a grid over the two other principal directions, inset by r and
    at most spacing_radii · r apart (thin spheres keep the distance fields' exact band
    narrow). Returns (centres (k, 3), radius r).
    """
    v = np.asarray(vertices, dtype=float)
    centre = 0.5 * (v.min(axis=0) + v.max(axis=0))
    _, _, axes = np.linalg.svd(v - v.mean(axis=0), full_matrices=False)
    local = (v - centre) @ axes.T
    lo, hi = local.min(axis=0), local.max(axis=0)
    thickness = hi[2] - lo[2]
    layers = max(1, int(np.ceil(thickness / (2.0 * max_radius) - 1e-9)))
    radius = 0.5 * thickness / layers
    grids = []
    for k in (0, 1):
        a, b = lo[k] + radius, hi[k] - radius
        count = int(np.ceil((b - a) / (spacing_radii * radius))) + 1 if b > a else 1
        grids.append(np.linspace(a, b, count) if b > a else np.array([0.5 * (lo[k] + hi[k])]))
    grids.append(lo[2] + radius * (1.0 + 2.0 * np.arange(layers)))
    u, w, z = np.meshgrid(*grids, indexing="ij")
    plate = np.stack([u.ravel(), w.ravel(), z.ravel()], -1)
    return centre + plate @ axes, float(radius)


def hand_plates(model, parts, meshes):
    """{hand bone: (centres (k, 3) m, radius m)}: each palm volume (BodyMesh "palm.<side>")
    as plate_samples, its spheres no thicker than PLATE_MAX_RADIUS or that hand's
    thickest finger capsule (a giant's palm needs no more layers than a child's)."""
    out = {}
    for m in meshes:
        if m.kind.startswith("palm"):
            fingers = [b for b, p in enumerate(parts) if p.split(".")[0] in ("finger", "thumb")
                       and part_side(p) == m.side]
            thickest = float(model.capsule_radius[fingers].max()) if fingers else 0.0
            out[m.bone] = plate_samples(m.vertices, max_radius=max(PLATE_MAX_RADIUS, thickest))
    return out


def axis_samples(radius, length, spacing_radii=SAMPLE_SPACING):
    """Sphere centres (k, 3) along a capsule axis (bone-local +Y from 0 to length m)."""
    k = int(np.ceil(length / (spacing_radii * radius))) + 1
    return np.stack([np.zeros(k), np.linspace(0.0, length, k), np.zeros(k)], -1)


def rest_frames(model):
    """World-from-bone rigid transforms (n, 4, 4) of the model's bones in the rest pose,
    with the kinematic base at the identity."""
    local = kinematics.transforms(quat.to_matrix(model.rest_rotations), model.rest_offsets)
    eye = np.broadcast_to(np.eye(4), (model.n_bones, 4, 4))
    return kinematics.chain(model.parents, None, local[None], relative=eye)[0]


HAND_PARTS = ("finger", "thumb", "hand")


def part_category(part):
    """'hand' for finger, thumb and hand bones (part labels like "finger.L"), else the
    label without its side ("arm", "neck", "head")."""
    base = part.split(".")[0]
    return "hand" if base in HAND_PARTS else base


def part_side(part):
    """'L', 'R' or None from a part label like "finger.L"."""
    tail = part.rsplit(".", 1)
    return tail[1] if len(tail) == 2 and tail[1] in ("L", "R") else None


def capsule_pair_kinds(model, parts):
    """Contact kind (n_pairs,) of each capsule pair of model.pairs from the bones' part
    labels (n,), as pair_kind."""
    return tuple(pair_kind(parts[i], parts[j]) for i, j in model.pairs)


def pair_kind(a, b):
    """Contact kind of two parts labelled like "finger.L", "head" or "torso": within one
    hand "finger–palm" between a finger or thumb and the palm (the hand part: the kind of
    the palm volume's samples, field_candidates) and "finger–finger" otherwise, "hand–hand"
    between the hands, "hand–face" between a hand part and the head or neck, else the two
    categories joined in alphabetical order ("arm–hand", "hand–torso", …)."""
    ca, cb = part_category(a), part_category(b)
    if ca == cb == "hand":
        if part_side(a) != part_side(b):
            return "hand–hand"
        return "finger–palm" if (a.split(".")[0] == "hand") != (b.split(".")[0] == "hand") else "finger–finger"
    if "hand" in (ca, cb) and {ca, cb} & {"head", "neck"}:
        return "hand–face"
    return "–".join(sorted((ca, cb)))


@dataclass(frozen=True, eq=False)
class BodyField:
    """One body volume ready for the solver: mesh (BodyMesh), grid (sdf.DistanceGrid,
    attached to mesh.bone), bones (k,) int, local (k, 3) m, radius (k,) m: the sample
    spheres that may touch it, kinds (k,) str: the contact kind of each sample."""

    mesh: BodyMesh
    grid: object
    bones: np.ndarray
    local: np.ndarray
    radius: np.ndarray
    kinds: tuple


def field_candidates(model, parts, mesh, plates):
    """Sample spheres that may touch `mesh`: the colliding hand bones (finger, thumb and
    hand parts) outside the volume's own bone chain, as (bones, local, radius, kinds).

    plates: {bone: (centres (k, 3) m bone-local, radius m)}: hand bones represented by
    a plate of spheres (plate_samples) instead of their capsule axis.
    """
    chain = np.zeros(model.n_bones, bool)
    if mesh.bone >= 0:
        chain = (model.ancestors[mesh.bone] > 0) | (model.ancestors[:, mesh.bone] > 0)
    bones, local, radius, kinds = [], [], [], []
    for b in range(model.n_bones):
        part = parts[b]
        if part_category(part) != "hand" or b == mesh.bone:
            continue
        if mesh.kind.startswith("palm"):
            # The palm's own fingers hang from it: its descendants may touch it, except
            # the first phalanges, which hinge at its rim (their knuckle skin folds).
            if model.ancestors[mesh.bone, b] > 0:
                continue
            p = model.parents[b]
            if p >= 0 and parts[p] == f"hand.{mesh.side}":
                continue
            kind = "finger–palm" if part_side(part) == mesh.side else "hand–hand"
        else:
            if chain[b]:
                continue
            kind = FIELD_CONTACT_KIND[mesh.kind]
        if b in plates:
            pts, r = plates[b]
        elif model.collide[b]:
            r = model.capsule_radius[b]
            pts = axis_samples(r, model.capsule_length[b])
        else:
            continue
        bones.append(np.full(len(pts), b))
        local.append(pts)
        radius.append(np.full(len(pts), r))
        kinds += [kind] * len(pts)
    if not bones:
        return np.zeros(0, np.intp), np.zeros((0, 3)), np.zeros(0), ()
    return np.concatenate(bones), np.concatenate(local), np.concatenate(radius), tuple(kinds)


def build_field(model, parts, mesh, plates, build_grid, spacing, margin):
    """BodyField of `mesh` with the samples of field_candidates that do not touch it in
    the rest pose.

    build_grid(vertices, triangles, bone, spacing, margin, reach) builds the
    sdf.DistanceGrid (sdf.build_distance_grid or a cache of it) at `spacing` m or half
    the thinnest sample radius if larger, exact within the thickest sample radius
    `reach` of the surface; the margin grows to that radius plus
    one cell so that a sample outside the grid is never within its radius of the
    surface. Returns None when no sample remains.
    """
    bones, local, radius, kinds = field_candidates(model, parts, mesh, plates)
    if len(bones) == 0:
        return None
    reach = float(radius.max())
    # The trilinear error scales with h²: half the thinnest sample's radius keeps it a
    # small fraction of every sphere on a giant's rig as on a human's (h = spacing there).
    spacing = max(spacing, 0.5 * float(radius.min()))
    grid = build_grid(mesh.vertices, mesh.triangles, mesh.bone, spacing, max(margin, reach + spacing), reach)
    rest = rest_frames(model)
    to_field = np.eye(4) if mesh.bone < 0 else np.linalg.inv(rest[mesh.bone])
    world = np.einsum("kij,kj->ki", rest[bones, :3, :3], local) + rest[bones, :3, 3]
    phi, _ = grid.sample(world @ to_field[:3, :3].T + to_field[:3, 3])
    touching = np.unique(bones[phi - radius < 0.0])
    keep = ~np.isin(bones, touching)
    if not np.count_nonzero(keep):
        return None
    return BodyField(mesh, grid, bones[keep], local[keep], radius[keep],
                     tuple(k for k, ok in zip(kinds, keep) if ok))


def region_owner(n_vertices, vertex_indices, group_indices, weights, group_region, min_weight=0.5):
    """Region (V,) int that dominates each vertex, or −1: the region whose groups' summed
    weight is largest and above min_weight (a vertex shared by head and neck bones is
    still the head-and-neck region's).

    vertex_indices, group_indices, weights (k,): sparse vertex-group weights;
    group_region (G,) int: each vertex group's region, −1 for none.
    """
    group_region = np.asarray(group_region, dtype=np.intp)
    g = np.asarray(group_indices, dtype=np.intp)
    region = group_region[g]
    ok = region >= 0
    n_regions = int(group_region.max(initial=-1)) + 1
    if n_regions == 0:
        return np.full(n_vertices, -1)
    total = np.zeros((n_vertices, n_regions))
    np.add.at(total, (np.asarray(vertex_indices, dtype=np.intp)[ok], region[ok]), np.asarray(weights, float)[ok])
    best = total.argmax(axis=1)
    return np.where(total[np.arange(n_vertices), best] > min_weight, best, -1)
