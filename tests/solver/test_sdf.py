"""Signed distance to a triangle mesh and its grid, against brute force and a sphere."""

import numpy as np
import pytest

from solver.core import sdf


R = 0.06
VERTS, TRIS = sdf.icosphere(2, R)


def sagitta():
    """Largest gap between the sphere and its inscribed mesh (at face centres)."""
    tri = VERTS[TRIS]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    return R - np.min(np.sum(n * tri[:, 0], axis=1))


def test_closest_point_on_triangle_beats_dense_sampling(rng):
    a, b, c = rng.normal(size=(3, 300, 3))
    p = rng.normal(size=(300, 3)) * 2
    q, code = sdf.closest_point_on_triangle(p, a, b, c)
    exact = np.linalg.norm(p - q, axis=-1)
    u, v = np.meshgrid(np.linspace(0, 1, 121), np.linspace(0, 1, 121))
    keep = u + v <= 1
    u, v = u[keep], v[keep]
    samples = a[:, None] + u[None, :, None] * (b - a)[:, None] + v[None, :, None] * (c - a)[:, None]
    dense = np.linalg.norm(samples - p[:, None], axis=-1).min(axis=1)
    assert np.all(exact <= dense + 1e-12)
    edge = np.max(np.linalg.norm(np.stack([b - a, c - a]), axis=-1), axis=0)
    assert np.all(dense - exact <= edge / 120)
    assert set(np.unique(code)) == set(range(7))  # every region exercised


def test_mesh_distance_is_exact_against_all_triangles(rng):
    points = rng.normal(size=(400, 3)) * 0.05
    signed = sdf.mesh_signed_distance(VERTS, TRIS, points)
    tri = VERTS[TRIS]
    q, _ = sdf.closest_point_on_triangle(points[:, None], tri[None, :, 0], tri[None, :, 1], tri[None, :, 2])
    brute = np.linalg.norm(q - points[:, None], axis=-1).min(axis=1)
    np.testing.assert_allclose(np.abs(signed), brute, rtol=0, atol=1e-15)


def test_mesh_distance_sign_and_value_match_the_sphere(rng):
    radius = rng.uniform(0.0, 2.0 * R, 2000)
    direction = rng.normal(size=(2000, 3))
    points = direction / np.linalg.norm(direction, axis=1, keepdims=True) * radius[:, None]
    signed = sdf.mesh_signed_distance(VERTS, TRIS, points)
    sag = sagitta()
    inside = radius < R - sag
    outside = radius > R
    assert np.all(signed[inside] < 0) and np.all(signed[outside] > 0)
    assert np.all(np.abs(signed - (radius - R)) <= sag + 1e-12)


def test_sign_is_right_next_to_vertices_and_edges():
    """Points just off a vertex or an edge midpoint along the radius: the pseudo-normal
    of that feature decides the sign (a face normal alone can get it wrong there)."""
    edge_mid = 0.5 * (VERTS[TRIS[:, 0]] + VERTS[TRIS[:, 1]])
    for base in (VERTS, edge_mid):
        unit = base / np.linalg.norm(base, axis=1, keepdims=True)
        out = sdf.mesh_signed_distance(VERTS, TRIS, base + 1e-4 * unit)
        inn = sdf.mesh_signed_distance(VERTS, TRIS, base - 1e-4 * unit)
        assert np.all(out > 0) and np.all(inn < 0)


def test_grid_interpolates_the_distance_and_its_gradient(rng):
    grid = sdf.build_distance_grid(VERTS, TRIS, bone=3, spacing=0.004, margin=0.02)
    assert grid.bone == 3
    lo, hi = grid.bounds
    assert np.all(lo <= VERTS.min(0) - 0.02 + 1e-12) and np.all(hi >= VERTS.max(0) + 0.02 - 1e-12)
    radius = rng.uniform(0.7 * R, R + 0.015, 1000)
    direction = rng.normal(size=(1000, 3))
    unit = direction / np.linalg.norm(direction, axis=1, keepdims=True)
    points = unit * radius[:, None]
    phi, grad = grid.sample(points)
    exact = sdf.mesh_signed_distance(VERTS, TRIS, points)
    # Trilinear error: curvature term h²/(8ρ) plus the mesh's creases (one cell wide).
    assert np.max(np.abs(phi - exact)) < 0.6e-3
    assert np.mean(np.abs(phi - exact)) < 0.1e-3
    cos = np.sum(grad * unit, axis=1) / np.linalg.norm(grad, axis=1)
    assert np.percentile(cos, 5) > np.cos(np.radians(10))


def test_grid_is_a_lower_bound_outside_its_box():
    grid = sdf.build_distance_grid(VERTS, TRIS, bone=0, spacing=0.01, margin=0.02)
    far = np.array([[0.3, 0.0, 0.0], [0.2, -0.2, 0.1]])
    phi, grad = grid.sample(far)
    assert np.all(phi <= sdf.mesh_signed_distance(VERTS, TRIS, far))
    assert np.all(phi > grid.margin)
    np.testing.assert_allclose(np.linalg.norm(grad, axis=1), 1.0)


def test_bad_meshes_are_rejected():
    with pytest.raises(ValueError):
        sdf.build_distance_grid(VERTS, TRIS + len(VERTS), bone=0)
    with pytest.raises(ValueError):
        sdf.build_distance_grid(VERTS, np.array([[0, 0, 1]]), bone=0)
    with pytest.raises(ValueError):
        sdf.build_distance_grid(VERTS, TRIS, bone=0, spacing=0.0)


def test_grid_of_a_huge_mesh_stays_within_the_node_budget():
    big = VERTS * (2.6 / np.ptp(VERTS[:, 0]))  # a 2.6 m "head", as a stylised robot has
    grid = sdf.build_distance_grid(big, TRIS, bone=0, spacing=0.005, margin=0.02, max_nodes=200_000)
    assert grid.values.size <= 200_000 * 1.1 and grid.spacing > 0.005
    phi, _ = grid.sample(np.zeros((1, 3)))
    assert phi[0] < 0  # the centre is still inside


def _open_sphere():
    """The test sphere with every triangle above z = 0.8 R removed: a hole like a neck cut."""
    keep = VERTS[TRIS].mean(axis=1)[:, 2] < 0.8 * R
    return VERTS, TRIS[keep]


def test_winding_number_is_one_inside_zero_outside_a_closed_mesh():
    rng = np.random.default_rng(3)
    points = rng.uniform(-2 * R, 2 * R, (300, 3))
    r = np.linalg.norm(points, axis=1)
    points = points[np.abs(r - R) > 0.1 * R]
    w = sdf.winding_number(VERTS, TRIS, points)
    inside = np.linalg.norm(points, axis=1) < R
    np.testing.assert_allclose(w, inside.astype(float), atol=1e-9)


def test_a_hole_does_not_flip_the_sign():
    v, t = _open_sphere()
    assert not sdf.is_closed(t) and sdf.is_closed(TRIS)
    rng = np.random.default_rng(4)
    d = rng.normal(size=(400, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    d = d[d[:, 2] < 0.5]  # directions well away from the hole
    for radius, inside in ((0.9 * R, True), (1.1 * R, False)):
        signed = sdf.mesh_signed_distance(v, t, radius * d)
        assert np.all((signed < 0) == inside)
        np.testing.assert_allclose(np.abs(signed), np.abs(sdf.mesh_signed_distance(VERTS, TRIS, radius * d)),
                                   atol=1e-12)
    # Near the hole the pseudo-normal test (a closed-mesh assumption) would call points
    # inside the sphere below the rim "outside"; the winding number does not.
    below_rim = np.array([[0.0, 0.0, 0.7 * R], [0.3 * R, 0.0, 0.6 * R]])
    assert np.all(sdf.mesh_signed_distance(v, t, below_rim) < 0)
    grid = sdf.build_distance_grid(v, t, bone=0, spacing=0.004, margin=0.02)
    phi, _ = grid.sample(below_rim)
    assert np.all(phi < 0)
    far_inside, _ = grid.sample(np.zeros((1, 3)))
    assert far_inside[0] < 0
