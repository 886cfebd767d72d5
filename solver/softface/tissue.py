"""Soft face: the skin of the head as an elastic layer on a rigid skull, reduced to a few
force-dual modes, stepped implicitly under fingertip contact.

Model. The soft tissue of a face (skin, fat, muscle over the skull, 0.5–2 cm thick)
deforms mostly by compression and shear through its thickness: a fingertip dents it,
the bone below does not move. A thin-shell (surface) model has no through-thickness
compression and no skull to rest on, so it would need an invented foundation spring.
Here the tissue is a layer of linear tetrahedra between the skin surface and an inward
offset of it (the skull surface, each skin vertex moved by `thickness` along its inward
normal): every skin triangle and its offset form a prism cut into three tetrahedra, the
cut of each side quad chosen by the global vertex order so that neighbouring prisms
agree (a conforming mesh). The inner surface is the fixed (Dirichlet) boundary, and so
is the rim of the skin patch, where the face joins the neck. Linear elasticity with
constant-strain tetrahedra (Young's modulus E in Pa, Poisson ratio ν; lumped mass from a
tissue density) gives the sparse stiffness H (the energy Hessian at rest) and the
diagonal mass M over the skin vertices' displacements (3 per vertex, x y z interleaved).
Source: "The Finite Element Method: Linear Static and Dynamic Finite Element Analysis"
(T. J. R. Hughes), linear tetrahedral element and lumped mass.

Subspace. "Force-Dual Modes: Subspace Design from Stochastic Forces" (Trusty, Chen,
Levin, Jacobson): model the forces, not the displacements. With forces F ~ N(0, Σ_F)
the static response U = H⁻¹F has covariance Σ_U = H⁻¹ Σ_F H⁻¹, and the m-dimensional
subspace B that best explains U in the M-norm solves Σ_U M B = B Λ with BᵀMB = I. For a
low-rank force model F = D A (A ~ N(0, I)), with M = N Nᵀ (N = M^½, M lumped) the
subspace is B = N⁻ᵀ Y, Y the leading left singular vectors of N H⁻¹ D. The contact
force model here is a normal pressure at each skin vertex, uncorrelated between
vertices, whose standard deviation is the vertex's area times a weight that is large
where the clip's fingertips come close (proximity_weights): D has one column per
vertex of that support. Its leading singular vectors are found with a randomised range
finder and power iterations ("Finding Structure with Randomness: Probabilistic
Algorithms for Constructing Approximate Matrix Decompositions", Halko, Martinsson,
Tropp), which needs only a few dozen solves with one sparse LU factorisation of H.
Linear modal analysis (the lowest generalized eigenvectors of H v = ω² M v) is the
special case Σ_F = M and the baseline (modal_basis).

Dynamics. In the subspace u = B q the face is M ü + C u̇ + H u = f with BᵀMB = I:
q̈ + C_r q̇ + K_r q = Bᵀ f, K_r = BᵀHB, and C_r damps every reduced mode with the same
damping ratio ζ (soft tissue is strongly damped). One backward Euler step
(step) solves for the end-of-step state with the fingertips' penalty forces (spheres of
given centres and radii against the nearest points of the deformed skin, projected by
Bᵀ) taken implicitly, so a stiff contact does not make the step unstable.

Units: metres, seconds, kilograms, newtons, pascals. Coordinates are those of the skin
given to build_face (the head bone's rest frame in the bake).
"""
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.spatial import cKDTree

from ..core import sdf
from ..core.settings import CONTACT_STIFFNESS

MODES = 20           # reduced coordinates of a face
YOUNG = 2.0e4        # Pa: facial soft tissue in indentation is 10–100 kPa
POISSON = 0.45       # nearly incompressible tissue; 0.5 would lock linear tetrahedra
THICKNESS = 0.01     # m of soft tissue over the skull (cheek ~1–2 cm, forehead ~0.5 cm)
DENSITY = 1050.0     # kg/m³ of soft tissue
DAMPING_RATIO = 1.0  # every reduced mode critically damped: a released cheek does not ring
SPREAD = 0.012       # m: fingertip proximity weight's Gaussian width (a fingertip pad's radius)
WELD = 1e-6          # m: vertices closer than this are one (UV seams split glTF meshes)
TOLERANCE = 1e-4     # m: a fingertip deeper than this in the dented skin gets a stiffer penalty
STIFFEN = 3          # at most 3 stiffenings (×4 each: 64× the contact stiffness)


@dataclass(frozen=True)
class FaceBody:
    """The elastic layer of a skin patch (build_face).

    vertices (V, 3) m: welded rest positions of the skin; triangles (T, 3) into them;
    normals (V, 3) outward unit; areas (V,) m² (a third of each incident triangle);
    free (V,) bool: vertices that move (not on the patch's rim or pinned);
    dof (V,) index of each free vertex's first of 3 DOFs, −1 for fixed ones;
    H (n, n) csc stiffness N/m, mass (n,) kg lumped diagonal, n = 3 · free.sum();
    welded (V0,) index of each input vertex into `vertices`;
    tet_count, young Pa, poisson, thickness m.
    """
    vertices: np.ndarray
    triangles: np.ndarray
    normals: np.ndarray
    areas: np.ndarray
    free: np.ndarray
    dof: np.ndarray
    H: sp.csc_matrix
    mass: np.ndarray
    welded: np.ndarray
    tet_count: int
    young: float
    poisson: float
    thickness: float

    @property
    def n(self):
        return len(self.mass)

    def displacement(self, u):
        """Per-vertex displacement (V, 3) m of a DOF vector u (n,) (fixed vertices 0)."""
        out = np.zeros((len(self.vertices), 3))
        out[self.free] = np.asarray(u).reshape(-1, 3)
        return out


def weld(vertices, tolerance=WELD):
    """(unique vertices (U, 3), index (V,) of each input vertex into them): vertices within
    `tolerance` m (on a grid of that size) become one. Deterministic (sorted grid keys)."""
    keys = np.round(np.asarray(vertices, float) / tolerance).astype(np.int64)
    _, first, index = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    return np.asarray(vertices, float)[first], index.reshape(-1)


def vertex_normals(vertices, triangles):
    """(normals (V, 3) unit, areas (V,) m²): area-weighted vertex normals of the triangle
    winding and a third of each incident triangle's area."""
    v, t = vertices, triangles
    cross = np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]])
    normals = np.zeros_like(v)
    areas = np.zeros(len(v))
    for k in range(3):
        np.add.at(normals, t[:, k], cross)
        np.add.at(areas, t[:, k], np.linalg.norm(cross, axis=1) / 6.0)
    length = np.linalg.norm(normals, axis=1, keepdims=True)
    return normals / np.maximum(length, 1e-30), areas


def rim(triangles, n_vertices):
    """(V,) bool: vertices on an edge used by one triangle only (the patch's open boundary)."""
    edges = np.sort(np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]]), axis=1)
    unique, count = np.unique(edges, axis=0, return_counts=True)
    out = np.zeros(n_vertices, bool)
    out[unique[count == 1].ravel()] = True
    return out


def layer_tets(triangles, n_vertices):
    """Tetrahedra (3T, 4) of the prisms between skin triangles (vertices 0..V−1) and their
    inner copies (V..2V−1). With a triangle's corners sorted by index a < b < c the prism
    is (a b c c'), (a b b' c'), (a a' b' c'): each side quad is cut from its lower-index
    skin corner to the other's inner copy, so the prisms sharing it cut it alike."""
    a, b, c = np.sort(triangles, axis=1).T
    a2, b2, c2 = a + n_vertices, b + n_vertices, c + n_vertices
    return np.concatenate([np.stack(x, 1) for x in ((a, b, c, c2), (a, b, b2, c2), (a, a2, b2, c2))])


def _elastic(points, tets, young, poisson, density, free_dof):
    """Assembled stiffness (n, n) csc and lumped mass (n,) of linear tetrahedra, keeping
    only DOFs with free_dof[point] ≥ 0 (the others are fixed at rest)."""
    lam = young * poisson / ((1 + poisson) * (1 - 2 * poisson))
    mu = young / (2 * (1 + poisson))
    x = points[tets]                                   # (E, 4, 3)
    edges = np.transpose(x[:, 1:] - x[:, :1], (0, 2, 1))  # columns x1−x0, x2−x0, x3−x0
    det = np.linalg.det(edges)
    ok = np.abs(det) > 1e-18                           # degenerate slivers carry nothing
    tets, edges, det = tets[ok], edges[ok], det[ok]
    volume = np.abs(det) / 6.0
    inv = np.linalg.inv(edges)                         # rows: gradients of shape functions 1..3
    grads = np.concatenate([-inv.sum(axis=1, keepdims=True), inv], axis=1)  # (E, 4, 3)
    n = 3 * int((free_dof >= 0).sum())
    rows, cols, vals = [], [], []
    eye = np.eye(3)
    for i in range(4):
        di = free_dof[tets[:, i]]
        for j in range(4):
            dj = free_dof[tets[:, j]]
            keep = (di >= 0) & (dj >= 0)
            if not keep.any():
                continue
            gi, gj, vol = grads[keep, i], grads[keep, j], volume[keep]
            # K_ij = V (λ g_i g_jᵀ + μ g_j g_iᵀ + μ (g_i·g_j) I)
            block = vol[:, None, None] * (lam * gi[:, :, None] * gj[:, None, :]
                                          + mu * gj[:, :, None] * gi[:, None, :]
                                          + mu * np.einsum("ek,ek->e", gi, gj)[:, None, None] * eye)
            r = di[keep][:, None, None] + np.arange(3)[None, :, None]
            c = dj[keep][:, None, None] + np.arange(3)[None, None, :]
            rows.append(np.broadcast_to(r, block.shape).ravel())
            cols.append(np.broadcast_to(c, block.shape).ravel())
            vals.append(block.ravel())
    H = sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))
    point_mass = np.zeros(len(points))
    for i in range(4):
        np.add.at(point_mass, tets[:, i], density * volume / 4.0)
    mass = np.zeros(n)
    live = free_dof >= 0
    for k in range(3):
        mass[free_dof[live] + k] = point_mass[live]
    return H, mass


def build_face(vertices, triangles, pinned=None, young=YOUNG, poisson=POISSON, thickness=THICKNESS,
               density=DENSITY):
    """The elastic layer (FaceBody) of a skin patch.

    vertices (V0, 3) m, triangles (T, 3): the skin of the head (open at the neck, seams
    welded here); pinned (V0,) bool or None: vertices held at rest besides the rim;
    young Pa, poisson in (0, 0.5), thickness m, density kg/m³. Normals point away from
    the patch's centroid on average (the winding is flipped otherwise). Raises
    ValueError for an empty patch, bad material values or no free vertex.
    """
    if not (young > 0 and 0 < poisson < 0.5 and thickness > 0 and density > 0):
        raise ValueError(f"soft face needs Young's modulus > 0 Pa, 0 < Poisson ratio < 0.5, thickness > 0 m; "
                         f"got {young} Pa, {poisson}, {thickness} m")
    vertices = np.asarray(vertices, float)
    triangles = np.asarray(triangles, np.intp)
    if len(triangles) == 0:
        raise ValueError("soft face: the skin patch has no triangles")
    v, index = weld(vertices)
    t = index[triangles]
    t = t[(t[:, 0] != t[:, 1]) & (t[:, 1] != t[:, 2]) & (t[:, 2] != t[:, 0])]
    used = np.zeros(len(v), bool)
    used[t.ravel()] = True
    normals, areas = vertex_normals(v, t)
    if np.mean(np.einsum("ij,ij->i", normals[used], v[used] - v[used].mean(axis=0))) < 0:
        t, normals = t[:, ::-1], -normals
    free = used & ~rim(t, len(v))
    if pinned is not None:
        held = np.zeros(len(v), bool)
        held[index[np.asarray(pinned, bool)]] = True
        free &= ~held
    if not free.any():
        raise ValueError("soft face: every vertex of the skin patch is fixed")
    dof = np.full(len(v), -1)
    dof[free] = 3 * np.arange(int(free.sum()))
    points = np.concatenate([v, v - thickness * normals])
    free_dof = np.concatenate([dof, np.full(len(v), -1)])
    tets = layer_tets(t, len(v))
    H, mass = _elastic(points, tets, young, poisson, density, free_dof)
    return FaceBody(v, t, normals, areas, free, dof, H, mass, index, len(tets), young, poisson, thickness)


def weight_share(n_vertices, vertex_indices, group_indices, weights, on_head):
    """(V,) the share of each vertex's skin weight on the vertex groups marked on_head
    (G,) bool, from sparse weights vertex_indices, group_indices, weights (k,): 0 for
    skin those bones do not carry, 1 for skin only they carry."""
    vi, gi, w = (np.asarray(x) for x in (vertex_indices, group_indices, weights))
    head, total = np.zeros(n_vertices), np.zeros(n_vertices)
    mine = np.asarray(on_head, bool)[gi]
    np.add.at(head, vi[mine], w[mine])
    np.add.at(total, vi, w)
    return head / np.maximum(total, 1e-30)


def proximity_weights(face, points, spread=None):
    """(V,) weights in [0, 1]: at each vertex the largest exp(−½ (d/spread)²) over the
    points (k, 3) m (fingertip samples over the clip) within 3 spread; 0 on fixed vertices.
    spread m: default SPREAD, at least twice the median edge length (a coarse mesh would
    otherwise give a fingertip fewer vertices than it has modes)."""
    if spread is None:
        t = face.triangles
        edges = np.linalg.norm(face.vertices[t] - face.vertices[np.roll(t, 1, axis=1)], axis=2)
        spread = max(SPREAD, 2.0 * float(np.median(edges)))
    w = np.zeros(len(face.vertices))
    points = np.asarray(points, float).reshape(-1, 3)
    if len(points):
        tree = cKDTree(points)
        d, _ = tree.query(face.vertices, distance_upper_bound=3 * spread)
        near = np.isfinite(d)
        w[near] = np.exp(-0.5 * (d[near] / spread) ** 2)
    w[~face.free] = 0.0
    return w


def contact_forces(face, weights, cutoff=1e-3):
    """D (n, s) csc: the contact force model, one column per free vertex whose weight
    exceeds cutoff · max: a normal force of standard deviation weight · area (N per unit
    pressure). Raises ValueError when no vertex carries weight."""
    weights = np.where(face.free, weights, 0.0)
    top = weights.max(initial=0.0)
    if top <= 0:
        raise ValueError("soft face: no fingertip comes near the face: no contact force model")
    support = np.flatnonzero(weights > cutoff * top)
    scale = weights[support] * face.areas[support]
    rows = (face.dof[support][:, None] + np.arange(3)).ravel()
    cols = np.repeat(np.arange(len(support)), 3)
    vals = (face.normals[support] * scale[:, None]).ravel()
    return sp.csc_matrix((vals, (rows, cols)), shape=(face.n, len(support)))


def factorize(H):
    """Sparse LU of the SPD stiffness H (scipy SuperLU, symmetric ordering)."""
    return spla.splu(sp.csc_matrix(H), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                     options={"SymmetricMode": True})


def force_dual_basis(face, forces, m, oversample=10, power=3, seed=0, lu=None):
    """Force-dual subspace B (n, m) with BᵀMB = I, and its singular values σ (m,) (Λ = σ²).

    forces: D (n, s) sparse or dense, the columns of the force model F = D A, A ~ N(0, I).
    B = N⁻¹ Y with Y the leading left singular vectors of N H⁻¹ D (M = N², lumped),
    by a randomised range finder with `power` power iterations (seeded: deterministic).
    lu: a factorize(face.H) to reuse. Raises ValueError if m exceeds the force rank.
    Source: "Force-Dual Modes: Subspace Design from Stochastic Forces"; "Finding Structure
    with Randomness: Probabilistic Algorithms for Constructing Approximate Matrix
    Decompositions".
    """
    s = forces.shape[1]
    if not 0 < m <= min(s, face.n):
        raise ValueError(f"soft face: {m} modes asked, the force model spans {s}")
    lu = lu or factorize(face.H)
    root = np.sqrt(face.mass)
    D = sp.csc_matrix(forces) if sp.issparse(forces) else np.asarray(forces)

    def C(x):        # N H⁻¹ D x
        return root[:, None] * lu.solve(np.asarray(D @ x))

    def Ct(y):       # Dᵀ H⁻¹ N y (H symmetric)
        return np.asarray(D.T @ lu.solve(root[:, None] * y))

    k = min(m + oversample, s)
    if k == s:       # the force model is small: its response exactly
        Y, sigma, _ = np.linalg.svd(C(np.eye(s)), full_matrices=False)
    else:
        rng = np.random.default_rng(seed)
        Q, _ = np.linalg.qr(C(rng.standard_normal((s, k))))
        for _ in range(power):
            Z, _ = np.linalg.qr(Ct(Q))
            Q, _ = np.linalg.qr(C(Z))
        small, sigma, _ = np.linalg.svd(Ct(Q).T, full_matrices=False)
        Y = Q @ small
    Y = Y[:, :m] * np.sign(Y[np.argmax(np.abs(Y[:, :m]), axis=0), np.arange(m)])  # sign: largest entry > 0
    return Y / root[:, None], sigma[:m]


def modal_basis(face, m, lu=None):
    """Linear modal analysis: the m lowest generalized eigenvectors of H v = ω² M v,
    B (n, m) with BᵀMB = I, and ω² (m,) ascending (rad²/s²) (scipy.sparse.linalg.eigsh,
    shift-invert about 0 with a fixed start vector: deterministic). The force-dual case
    Σ_F = M. lu: a factorize(face.H) to reuse. Raises ValueError for m out of range."""
    if not 0 < m < face.n:
        raise ValueError(f"soft face: {m} modes asked of {face.n} degrees of freedom")
    lu = lu or factorize(face.H)
    M = sp.diags(face.mass).tocsc()
    inverse = spla.LinearOperator(face.H.shape, matvec=lu.solve, dtype=float)
    w, B = spla.eigsh(face.H, k=m, M=M, sigma=0.0, which="LM", v0=np.ones(face.n), OPinv=inverse)
    order = np.argsort(w)
    w, B = w[order], B[:, order]
    B = B / np.sqrt(np.einsum("ij,i,ij->j", B, face.mass, B))
    B = B * np.sign(B[np.argmax(np.abs(B), axis=0), np.arange(m)])
    return B, w


@dataclass(frozen=True)
class ReducedFace:
    """The face in m reduced coordinates q (u = B q).

    face FaceBody; basis B (n, m) with BᵀMB = I; K (m, m) = BᵀHB N/m per unit q;
    C (m, m) damping (every eigenmode of K with damping ratio ζ); rows (V, 3, m): B at
    every skin vertex (zero at fixed ones); tree: cKDTree of the triangle centroids and
    reach m, the largest centroid-to-corner distance (candidate triangles of a contact);
    mode_reach (m,): each mode's largest vertex displacement per unit coordinate (bounds
    how far any vertex moves: Σ_j |q_j| mode_reach_j).
    """
    face: FaceBody
    basis: np.ndarray
    K: np.ndarray
    C: np.ndarray
    rows: np.ndarray
    tree: cKDTree
    reach: float
    mode_reach: np.ndarray

    @property
    def m(self):
        return self.basis.shape[1]

    def positions(self, q, vertices=slice(None)):
        """Deformed skin positions (k, 3) m of `vertices` at reduced coordinates q (m,)."""
        return self.face.vertices[vertices] + self.rows[vertices] @ q


def reduce(face, basis, damping_ratio=DAMPING_RATIO):
    """ReducedFace of `face` in `basis` (n, m), BᵀMB = I assumed (force_dual_basis,
    modal_basis). C_r = V diag(2 ζ ω) Vᵀ where K_r = V diag(ω²) Vᵀ."""
    K = basis.T @ (face.H @ basis)
    K = 0.5 * (K + K.T)
    w2, V = np.linalg.eigh(K)
    C = (V * (2.0 * damping_ratio * np.sqrt(np.maximum(w2, 0.0)))) @ V.T
    rows = np.zeros((len(face.vertices), 3, basis.shape[1]))
    rows[face.free] = basis.reshape(-1, 3, basis.shape[1])
    corners = face.vertices[face.triangles]
    centroids = corners.mean(axis=1)
    reach = float(np.linalg.norm(corners - centroids[:, None], axis=2).max())
    mode_reach = np.linalg.norm(rows, axis=1).max(axis=0)
    return ReducedFace(face, basis, K, C, rows, cKDTree(centroids), reach, mode_reach)


def static_displacement(reduced, force):
    """u (n,) m: the reduced static response B K_r⁻¹ Bᵀ f to a force f (n,) N."""
    return reduced.basis @ np.linalg.solve(reduced.K, reduced.basis.T @ force)


def point_force(face, centre, total, radius=SPREAD):
    """f (n,) N: `total` N pressed inward along the skin normals, spread over the free
    vertices within `radius` m of `centre` (3,) with area · (1 − (d/radius)²) weights."""
    d = np.linalg.norm(face.vertices - np.asarray(centre, float), axis=1)
    w = np.where(face.free & (d < radius), face.areas * (1.0 - (d / radius) ** 2), 0.0)
    if w.sum() <= 0:
        raise ValueError("soft face: no free skin vertex within the force's radius")
    f = -(total * w / w.sum())[:, None] * face.normals
    return f[face.free].ravel()


def far_field_ratio(face, u, centre, distance=0.04):
    """max |u| over vertices farther than `distance` m from `centre` (3,) divided by max |u|
    (0 for no displacement): the locality of a response u (n,)."""
    disp = np.linalg.norm(face.displacement(u), axis=1)
    peak = disp.max()
    far = np.linalg.norm(face.vertices - np.asarray(centre, float), axis=1) > distance
    return float(disp[far].max(initial=0.0) / peak) if peak > 0 else 0.0


@dataclass(frozen=True)
class Contact:
    """Fingertip contact after a step, per fingertip (k of them): depth (k,) m, the
    penetration of its sphere into the deformed skin (0 without contact); force (k, 3) N,
    the skin's push on the fingertip (the skin gets the opposite); level: the stiffenings
    the step's penalty took (step's `level` for the next step of a held press)."""
    depth: np.ndarray
    force: np.ndarray
    level: int = 0


def step(reduced, q, v, h, centres=(), radii=(), stiffness=CONTACT_STIFFNESS, iterations=4, tolerance=TOLERANCE,
         stiffen=STIFFEN, level=0):
    """One backward Euler step of the reduced face: (q', v', Contact).

    q, v (m,) reduced position and velocity; h s; centres (k, 3) m and radii (k,) m:
    fingertip spheres (held where they are over the step); stiffness N/m: penalty of a
    fingertip pad pressed into the skin, shared over its contact samples (the point of
    each nearby deformed triangle nearest the centre, contact_samples). q' minimises the
    step's incremental potential
        E(q') = |q'−q−hv|²/(2h²) + (q'−q)ᵀC_r(q'−q)/(2h) + q'ᵀK_r q'/2 + Σ k_i max(d_i(q'), 0)²/2,
    whose stationarity is the backward Euler equation, by Gauss–Newton steps with a
    backtracking line search on E (the contact geometry is not linear: a plain Newton
    iteration can run away where the subspace barely reaches the finger).
    A penalty leaves a pad inside the skin by its force over k; while a fingertip is more
    than `tolerance` m inside the dented skin the penalty is made 4× stiffer and the step
    solved again from there, at most `stiffen` times (penalty continuation: the limit is
    the non-penetrating step; where the subspace cannot take the finger's shape, the
    stiffest penalty's least-squares compromise), starting `level` stiffenings up.
    Contact.force is the last penalty's push, Contact.level its stiffenings.
    """
    centres = np.asarray(centres, float).reshape(-1, 3)
    radii = np.broadcast_to(np.asarray(radii, float), (len(centres),))
    m = reduced.m
    A = np.eye(m) / h ** 2 + reduced.C / h + reduced.K
    q_pred = q + h * v

    q1 = np.linalg.solve(A, q_pred / h ** 2 + reduced.C @ q / h)  # the step without contact
    # triangles any iterate may touch: those near at rest, widened by the larger of q and
    # the contact-free step plus their difference (contact only pushes the skin back)
    bound = np.abs(q) + np.abs(q1) + np.abs(q1 - q)
    near = _candidates(reduced, bound, centres, radii)

    def linearised(x, stiff):
        """E(x), its gradient, the Gauss–Newton Hessian with penalty stiffness `stiff`."""
        g = (x - q_pred) / h ** 2 + reduced.C @ (x - q) / h + reduced.K @ x
        e = 0.5 * (x - q_pred) @ (x - q_pred) / h ** 2 + 0.5 * (x - q) @ reduced.C @ (x - q) / h \
            + 0.5 * x @ reduced.K @ x
        H = A.copy()
        for c, r, idx in zip(centres, radii, near):
            d, G, _, k = contact_samples(reduced, x, c, r, stiff, candidates=idx)
            on = d > 0
            e += 0.5 * (k[on] * d[on] ** 2).sum()
            g += G[on].T @ (k[on] * d[on])
            H += (G[on].T * k[on]) @ G[on]
        return e, g, H

    def contact(x, stiff):
        depth, force = np.zeros(len(centres)), np.zeros((len(centres), 3))
        for j, (c, r, idx) in enumerate(zip(centres, radii, near)):
            d, _, n, k = contact_samples(reduced, x, c, r, stiff, candidates=idx)
            depth[j] = max(d.max(initial=0.0), 0.0)
            force[j] = (k * np.maximum(d, 0.0)) @ n
        return Contact(depth, force)

    stiff = stiffness
    touch = contact(q1, stiff)
    first = min(level, stiffen)
    for level in range(first, stiffen + 1 if len(centres) else 0):
        if level > first and touch.depth.max(initial=0.0) <= tolerance:
            break
        stiff = stiffness * 4.0 ** level
        e, g, H = linearised(q1, stiff)
        for _ in range(iterations):
            delta = -np.linalg.solve(H, g)
            slope = g @ delta
            if -slope <= 1e-9 * max(e, 1e-30):   # E would change by less than 1e-9 of itself
                break
            alpha = 1.0
            while alpha > 1e-4:
                trial = linearised(q1 + alpha * delta, stiff)
                if trial[0] <= e + 1e-4 * alpha * slope:
                    break
                alpha *= 0.5
            else:
                break
            q1 = q1 + alpha * delta
            e, g, H = trial
        touch = contact(q1, stiff)
    touch = Contact(touch.depth, touch.force, int(round(np.log(stiff / stiffness) / np.log(4.0))))
    return q1, (q1 - q) / h, touch


def simulate(reduced, centres, radii, fps, substeps=4, stiffness=CONTACT_STIFFNESS):
    """(coordinates (F, m) at each frame, penetration (F,) m of the deepest fingertip at
    each frame) of the reduced face starting at rest under fingertip spheres centres
    (F, k, 3) m, radii (k,) m, that move linearly between frames at fps (frames per
    second). A frame is split into at least `substeps` steps, more where a fingertip moves
    more than half its radius in one (so no centre crosses the skin within a step). A
    held press starts each step at the penalty stiffness the last one needed
    (Contact.level), and again at the base stiffness where that leaves a pad deeper than
    TOLERANCE (a stiff penalty from the contact-free step can lose a fast fingertip).
    """
    centres = np.asarray(centres, float)
    radii = np.asarray(radii, float)
    F = len(centres)
    q, v = np.zeros(reduced.m), np.zeros(reduced.m)
    coords, depth = np.zeros((F, reduced.m)), np.zeros(F)
    level = 0
    for f in range(F):
        if f == 0:
            n, start = 1, centres[0]
        else:
            start = centres[f - 1]
            move = np.linalg.norm(centres[f] - start, axis=1) / (0.5 * radii)
            n = max(int(substeps), int(np.ceil(move.max(initial=0.0))))
        for s in range(n):
            t = (s + 1) / n
            args = (reduced, q, v, 1.0 / (fps * n), (1 - t) * start + t * centres[f], radii, stiffness)
            out = step(*args, level=level)
            if level and out[2].depth.max(initial=0.0) > TOLERANCE:   # the held press's stiffness did not hold it
                out = step(*args)
            q, v, contact = out
            level = contact.level if contact.depth.max(initial=0.0) > 0 else 0
        coords[f], depth[f] = q, contact.depth.max(initial=0.0)
    return coords, depth


def contact_samples(reduced, q, centre, radius, stiffness=CONTACT_STIFFNESS, margin=0.005, candidates=None):
    """Contact samples of a fingertip sphere (centre (3,) m, radius m) on the skin
    deformed by q (m,): on every triangle within radius + margin of the centre, its
    point nearest the centre (a material point: triangle and barycentric weights).

    Returns d (s,) m, ∇d (s, m), n (s, 3), k (s,) N/m: sample i's penetration depth is
    d_i + ∇d_i·(q' − q) near q along its outward direction n_i (from the triangle's point
    towards the centre, flipped for a centre under the skin), with stiffness k_i = stiffness ·
    min(1, its triangle's area / (π radius²)): a pad pressed flat into a fine mesh is
    shared over the triangles it covers, one triangle larger than the pad takes it all.
    candidates: triangle indices to look at (default: those q can bring near). Empty
    arrays when no skin is near.
    """
    face = reduced.face
    idx = _candidates(reduced, q, [centre], [radius], margin)[0] if candidates is None else candidates
    tri = face.triangles[idx]
    a, b, c = reduced.positions(q, tri.ravel()).reshape(-1, 3, 3).transpose(1, 0, 2)
    p, code = sdf.closest_point_on_triangle(centre, a, b, c)
    offset = centre - p
    dist = np.linalg.norm(offset, axis=1)
    keep = dist < radius + margin
    tri, a, b, c, p, offset, dist, code = (x[keep] for x in (tri, a, b, c, p, offset, dist, code))
    cross = np.cross(b - a, c - a)
    area = 0.5 * np.linalg.norm(cross, axis=1)
    normal = cross / np.maximum(2 * area, 1e-30)[:, None]
    # Under the skin only by a triangle's own face: behind the plane of a triangle whose
    # nearest feature is an edge or a corner is outside in a concave spot (beside a nose),
    # and a centre truly under the skin lies under some triangle's face as well.
    under = (code == sdf.FACE) & (np.einsum("ij,ij->i", offset, normal) < 0)
    side = np.where(under, -1.0, 1.0)
    out = np.where(dist[:, None] > 1e-12, offset / np.maximum(dist, 1e-12)[:, None] * side[:, None], normal)
    # barycentric weights of each point on its triangle
    e1, e2, ep = b - a, c - a, p - a
    d11, d12, d22 = (e1 * e1).sum(1), (e1 * e2).sum(1), (e2 * e2).sum(1)
    d1p, d2p = (e1 * ep).sum(1), (e2 * ep).sum(1)
    det = np.maximum(d11 * d22 - d12 ** 2, 1e-30)
    v = (d22 * d1p - d12 * d2p) / det
    w = (d11 * d2p - d12 * d1p) / det
    bary = np.stack([1 - v - w, v, w], 1)
    # d = r − side·|c − x(q)|: ∂d/∂x = out, x = Σ bary · (rest + rows q)
    G = np.einsum("pk,pj,pjkm->pm", out, bary, reduced.rows[tri])
    k = stiffness * np.minimum(1.0, area / (np.pi * radius ** 2))
    return radius - side * dist, G, out, k


def _candidates(reduced, q, centres, radii, margin=0.005):
    """Per fingertip the triangles (indices) within radius + margin of its centre at q
    (found on the rest skin, widened by how far q can move a vertex)."""
    moved = float(np.abs(q) @ reduced.mode_reach)
    return [np.asarray(reduced.tree.query_ball_point(c, r + margin + reduced.reach + moved), np.intp)
            for c, r in zip(centres, radii)]
