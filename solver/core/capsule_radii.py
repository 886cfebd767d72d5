"""Capsule radii from a skin: how thick the flesh around each bone is."""

import numpy as np

RADIUS_PERCENTILE = 50.0
"""The median vertex distance: robust to the skin's caps and webs between fingers."""


def radius_from_points(points, head, tail, percentile=RADIUS_PERCENTILE):
    """Capsule radius (m) of the bone head→tail (3,) m from the skin points (k, 3) m it owns.

    Distances to the head–tail segment of the points lying alongside it (projection
    strictly between head and tail; all points when fewer than 8 do), at `percentile`.
    Raises ValueError for fewer than 4 points or a zero-length bone.
    """
    p = np.asarray(points, dtype=float).reshape(-1, 3)
    a, d = np.asarray(head, dtype=float), np.asarray(tail, dtype=float) - np.asarray(head, dtype=float)
    if len(p) < 4:
        raise ValueError("at least 4 skin points are needed for a capsule radius")
    if not d @ d > 0:
        raise ValueError("the bone has zero length")
    s = (p - a) @ d / (d @ d)
    inside = (s > 0.0) & (s < 1.0)
    if inside.sum() >= 8:
        p, s = p[inside], s[inside]
    s = np.clip(s, 0.0, 1.0)
    return float(np.percentile(np.linalg.norm(p - a - s[:, None] * d, axis=1), percentile))


def dominant_owner(n_vertices, vertex_indices, group_indices, weights, min_weight=0.5):
    """Index (V,) of the vertex group that dominates each vertex with weight > min_weight, else -1.

    vertex_indices, group_indices, weights (k,): the sparse vertex-group weights.
    """
    owner = np.full(n_vertices, -1)
    best = np.full(n_vertices, float(min_weight))
    for v, g, w in zip(vertex_indices, group_indices, weights):
        if w > best[v]:  # ties keep the first group: deterministic
            best[v], owner[v] = w, g
    return owner
