"""Soft face: the tetrahedral layer, force-dual and modal subspaces, the reduced step."""
import numpy as np
import pytest
import scipy.linalg

from solver.core import sdf
from solver.softface import tissue
from solver.core.body_volumes import submesh

RADIUS = 0.09  # m: a head-sized sphere cap, open at the neck


@pytest.fixture(scope="module")
def cap():
    v, t = sdf.icosphere(3, RADIUS)
    v, t = submesh(v, t, v[:, 2] > -0.03)
    return tissue.build_face(v, t)


def tips_on(face):
    """Two fingertip spots on the cap's surface (cheek-like and chin-like) far apart."""
    return np.array([[RADIUS, 0.0, 0.0], [0.0, RADIUS, 0.02]]) * np.array([[1.0], [RADIUS / np.hypot(RADIUS, 0.02)]])


def dense(face):
    return face.H.toarray(), np.diag(face.mass)


def subspace_distance(A, B, M):
    """sin of the largest principal angle between span A and span B in the M inner product."""
    r = np.sqrt(np.diag(M))
    qa, _ = np.linalg.qr(r[:, None] * A)
    qb, _ = np.linalg.qr(r[:, None] * B)
    s = np.linalg.svd(qa.T @ qb, compute_uv=False)
    return float(np.sqrt(max(0.0, 1.0 - s.min() ** 2)))


def flat_patch(size=0.2, spacing=0.005):
    n = int(round(size / spacing)) + 1
    x, y = np.meshgrid(np.arange(n) * spacing, np.arange(n) * spacing, indexing="ij")
    v = np.stack([x.ravel(), y.ravel(), np.zeros(n * n)], 1)
    idx = np.arange(n * n).reshape(n, n)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    return v, np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])


def test_layer_is_conforming():
    v, t = sdf.icosphere(2, RADIUS)
    v, t = submesh(v, t, v[:, 2] > 0.0)
    tets = tissue.layer_tets(t, len(v))
    faces = np.sort(np.concatenate([tets[:, [0, 1, 2]], tets[:, [0, 1, 3]], tets[:, [0, 2, 3]], tets[:, [1, 2, 3]]]), 1)
    _, count = np.unique(faces, axis=0, return_counts=True)
    rim_edges = int(tissue.rim(t, len(v)).sum())  # a closed rim loop has as many edges as vertices
    assert count.max() == 2
    assert (count == 1).sum() == 2 * len(t) + 2 * rim_edges  # skin, skull and the rim's side quads


def test_confined_compression_matches_the_one_dimensional_answer():
    # A uniform pressure p on a wide layer over a rigid base: far from the rim the tissue is
    # in confined compression, u = p t / E_oed with E_oed = E (1 − ν) / ((1 + ν)(1 − 2ν)).
    v, t = flat_patch()
    E, nu, th, p = 2e4, 0.3, 0.005, 100.0
    face = tissue.build_face(v, t, young=E, poisson=nu, thickness=th)
    f = -(p * face.areas[face.free])[:, None] * face.normals[face.free]
    u = face.displacement(tissue.factorize(face.H).solve(f.ravel()))
    centre = np.linalg.norm(face.vertices[:, :2] - 0.1, axis=1) < 0.02
    expected = p * th * (1 + nu) * (1 - 2 * nu) / (E * (1 - nu))
    assert np.allclose(-u[centre] @ face.normals[0], expected, rtol=0.02)


def test_seams_are_welded():
    v, t = flat_patch(0.05)
    face = tissue.build_face(v, t)
    split = np.concatenate([v, v[t[:10].ravel()]])           # ten triangles on their own vertices
    t2 = t.copy()
    t2[:10] = len(v) + np.arange(30).reshape(10, 3)
    welded = tissue.build_face(split, t2)
    assert welded.n == face.n
    assert abs(welded.H - face.H).max() < 1e-9 * abs(face.H).max()
    assert (welded.welded[len(v):] == face.welded[t[:10].ravel()]).all()


def test_bad_material_is_refused():
    v, t = flat_patch(0.05)
    with pytest.raises(ValueError, match="Poisson"):
        tissue.build_face(v, t, poisson=0.5)


def test_modal_basis_is_the_lowest_generalized_eigenvectors(cap):
    H, M = dense(cap)
    w, V = scipy.linalg.eigh(H, M)
    m = 1 + max(range(5, 14), key=lambda k: w[k] / w[k - 1])  # stop at a spectral gap (the cap is symmetric)
    B, w2 = tissue.modal_basis(cap, m)
    assert np.allclose(B.T @ M @ B, np.eye(m), atol=1e-10)
    assert np.allclose(w2, w[:m], rtol=1e-8)
    assert subspace_distance(B, V[:, :m], M) < 1e-6


def test_force_dual_with_mass_forces_is_modal_analysis(cap):
    # Σ_F = M: F = N A with N = M^½ gives the linear modal analysis subspace (exact SVD: the
    # layer's spectrum is too clustered for a few power iterations to separate).
    H, M = dense(cap)
    w, V = scipy.linalg.eigh(H, M)
    m = 1 + max(range(5, 14), key=lambda k: w[k] / w[k - 1])
    B, _ = tissue.force_dual_basis(cap, np.diag(np.sqrt(cap.mass)), m, oversample=cap.n)  # exact SVD
    assert np.allclose(B.T @ M @ B, np.eye(m), atol=1e-10)
    assert subspace_distance(B, V[:, :m], M) < 1e-4


def test_force_dual_solves_the_generalized_eigenproblem(cap):
    H, M = dense(cap)
    D = tissue.contact_forces(cap, tissue.proximity_weights(cap, tips_on(cap)))
    X = np.linalg.solve(H, D.toarray())
    sigma_u = X @ X.T                                    # H⁻¹ D Dᵀ H⁻¹
    lam, V = scipy.linalg.eigh(M @ sigma_u @ M, M)       # Σ_U M b = λ b ⇔ M Σ_U M b = λ M b
    lam, V = lam[::-1], V[:, ::-1]
    m = 1 + max(range(5, 14), key=lambda k: lam[k - 1] / lam[k])
    B, s = tissue.force_dual_basis(cap, D, m, oversample=D.shape[1])  # the exact SVD
    assert np.allclose(B.T @ M @ B, np.eye(m), atol=1e-10)
    assert np.allclose(s ** 2, lam[:m], rtol=1e-9)
    residual = sigma_u @ M @ B - B * s ** 2
    assert np.abs(residual).max() < 1e-8 * np.abs(B * s ** 2).max()
    assert subspace_distance(B, V[:, :m], M) < 1e-6
    fast, s_fast = tissue.force_dual_basis(cap, D, m)             # randomised range finder
    assert np.allclose(fast.T @ M @ fast, np.eye(m), atol=1e-10)
    assert np.allclose(s_fast, s, rtol=1e-6)
    # the displacement variance it explains, against the optimum's (vectors next to a
    # near tie converge slowly, but then either explains about as much)
    captured = np.trace(fast.T @ M @ sigma_u @ M @ fast) / np.trace(B.T @ M @ sigma_u @ M @ B)
    assert 0.99 < captured <= 1.0 + 1e-9


def test_a_force_far_from_the_support_barely_moves_the_modes(cap):
    tip = tips_on(cap)[0]
    B, _ = tissue.force_dual_basis(cap, tissue.contact_forces(cap, tissue.proximity_weights(cap, [tip])), 10)
    near = B.T @ tissue.point_force(cap, tip, 1.0)
    far = B.T @ tissue.point_force(cap, -tip, 1.0)        # the other side of the head
    assert np.linalg.norm(far) < 1e-3 * np.linalg.norm(near)


def test_reduced_static_solve_is_exact_for_forces_in_the_span(cap):
    B, _ = tissue.force_dual_basis(cap, tissue.contact_forces(cap, tissue.proximity_weights(cap, tips_on(cap))), 12)
    reduced = tissue.reduce(cap, B)
    c = np.linspace(-1.0, 1.0, 12) * 1e-4
    f = cap.H @ (B @ c)
    full = tissue.factorize(cap.H).solve(f)
    assert np.allclose(tissue.static_displacement(reduced, f), full, atol=1e-9 * np.abs(full).max())
    assert np.allclose(full, B @ c, atol=1e-9 * np.abs(full).max())


def test_force_dual_is_local_and_modal_is_not(cap):
    tip = tips_on(cap)[0]
    fd, _ = tissue.force_dual_basis(cap, tissue.contact_forces(cap, tissue.proximity_weights(cap, tips_on(cap))), 20)
    lma, _ = tissue.modal_basis(cap, 20)
    f = tissue.point_force(cap, tip, 1.0)
    full = tissue.factorize(cap.H).solve(f)
    ratios = {name: tissue.far_field_ratio(cap, tissue.static_displacement(tissue.reduce(cap, B), f), tip)
              for name, B in (("fd", fd), ("modal", lma))}
    assert ratios["fd"] < 1.5 * tissue.far_field_ratio(cap, full, tip) + 0.01
    assert ratios["modal"] > 0.5                        # spooky action at a distance
    peak = np.abs(tissue.static_displacement(tissue.reduce(cap, fd), f)).max()
    assert 0.9 < peak / np.abs(full).max() <= 1.0 + 1e-9  # Galerkin: never softer than the full model


def single_mode_face(cap, zeta):
    B, w2 = tissue.modal_basis(cap, 1)
    return tissue.reduce(cap, B, damping_ratio=zeta), float(np.sqrt(w2[0]))


def test_release_follows_the_backward_euler_recurrence(cap):
    # q'' + 2ζω q' + ω² q = 0 under backward Euler: (1 + 2ζωh + ω²h²) q_{n+1} − (2 + 2ζωh) q_n + q_{n−1} = 0.
    zeta = 0.2
    reduced, omega = single_mode_face(cap, zeta)
    h = 0.01 / omega
    q, v, qs = np.array([1e-3]), np.zeros(1), [1e-3]
    for _ in range(800):
        q, v, _ = tissue.step(reduced, q, v, h)
        qs.append(q[0])
    qs = np.array(qs)
    residual = (1 + 2 * zeta * omega * h + (omega * h) ** 2) * qs[2:] - (2 + 2 * zeta * omega * h) * qs[1:-1] + qs[:-2]
    assert np.abs(residual).max() < 1e-12 * np.abs(qs).max()
    # and, at this small step (numerical damping ≈ ωh/2 = 0.005), the continuous answer:
    # released from rest, q is next at a maximum after one damped period, q0 e^{−ζωt}
    t = np.arange(len(qs)) * h
    peaks = [i for i in range(1, len(qs) - 1) if qs[i] > qs[i - 1] and qs[i] > qs[i + 1]]
    assert peaks
    i = peaks[0]
    assert abs(t[i] * omega * np.sqrt(1 - zeta ** 2) / (2 * np.pi) - 1) < 0.01
    assert abs(qs[i] / (1e-3 * np.exp(-zeta * omega * t[i])) - 1) < 0.05


@pytest.fixture(scope="module")
def fine_cap():
    v, t = sdf.icosphere(4, RADIUS)   # 6 mm edges: a fingertip pad covers a few vertices
    v, t = submesh(v, t, v[:, 2] > -0.03)
    return tissue.build_face(v, t)


def test_press_dents_and_release_returns_to_rest(fine_cap):
    cap = fine_cap
    B, _ = tissue.force_dual_basis(cap, tissue.contact_forces(cap, tissue.proximity_weights(cap, tips_on(cap))), 20)
    reduced = tissue.reduce(cap, B)
    tip, r = tips_on(cap)[0], 0.008
    centre = tip * (1 + (r - 0.003) / RADIUS)           # sphere overlapping the rest skin by 3 mm
    h = 1 / 240
    q, v = np.zeros(20), np.zeros(20)
    for _ in range(120):   # the penalty alone (no stiffening): its balance is checked below
        q, v, contact = tissue.step(reduced, q, v, h, [centre], [r], stiffness=3e4, stiffen=0)
    dent = cap.displacement(B @ q)
    peak = np.linalg.norm(dent, axis=1).max()
    assert 2.5e-3 < peak < 4e-3                           # the skin gives under the finger (facets: a
    assert 0 < contact.depth[0] < 5e-4                    # little more than the 3 mm) and it stops at the dent
    # static balance: K_r q = −Σ k_i d_i ∇d_i over the pressed samples, and the finger
    # gets the opposite push, outward
    d, G, n, k = tissue.contact_samples(reduced, q, centre, r, 3e4)
    on = d > 0
    assert on.sum() > 3                                   # a pad over several triangles
    # (to 1 %: the line search stops where the contact's curvature, which Gauss–Newton
    # leaves out, spoils the descent)
    assert np.allclose(reduced.K @ q, -G[on].T @ (k[on] * d[on]), atol=1e-2 * np.abs(reduced.K @ q).max())
    assert np.allclose(contact.force[0], (k[on] * d[on]) @ n[on])
    assert contact.force[0] @ tip / np.linalg.norm(contact.force[0]) / RADIUS > 0.99
    assert contact.depth[0] == pytest.approx(d.max())
    assert np.abs(v).max() < 1e-6 * np.abs(q).max() / h    # at rest against the finger: no chatter
    stiffer = q
    for _ in range(120):
        stiffer, _v, harder = tissue.step(reduced, stiffer, np.zeros(20), h, [centre], [r], stiffness=3e5, stiffen=0)
    assert harder.depth[0] < 0.25 * contact.depth[0]
    # the default step stiffens the penalty until the pad is within the tolerance
    held = q
    for _ in range(60):
        held, _v, kept = tissue.step(reduced, held, np.zeros(20), h, [centre], [r], stiffness=3e4)
    assert 0 < kept.depth[0] <= tissue.TOLERANCE < contact.depth[0] and kept.level > 0
    # a held press that starts at the stiffness it needed keeps the pad as close
    again, _v, carried = tissue.step(reduced, held, np.zeros(20), h, [centre], [r], stiffness=3e4, level=kept.level)
    assert carried.depth[0] <= tissue.TOLERANCE and np.allclose(again, held, atol=1e-3 * np.abs(held).max())
    # released: back to rest within 0.2 s (1 % of the dent), monotonically (critically damped)
    norms = []
    for _ in range(int(0.2 / h)):
        q, v, c = tissue.step(reduced, q, v, h)
        norms.append(np.abs(q).max())
    assert norms[-1] < 0.01 * np.abs(stiffer).max()


def test_same_inputs_give_bit_identical_modes_and_steps(cap):
    def run():
        B, _ = tissue.force_dual_basis(cap, tissue.contact_forces(cap, tissue.proximity_weights(cap, tips_on(cap))), 8)
        reduced = tissue.reduce(cap, B)
        q, v = np.zeros(8), np.zeros(8)
        centre = tips_on(cap)[0] * (1 + 0.005 / RADIUS)
        for _ in range(20):
            q, v, _c = tissue.step(reduced, q, v, 1 / 240, [centre], [0.008])
        return B, q
    (B1, q1), (B2, q2) = run(), run()
    assert B1.tobytes() == B2.tobytes() and q1.tobytes() == q2.tobytes()
    assert np.abs(q1).max() > 0
