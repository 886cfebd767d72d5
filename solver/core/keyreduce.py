"""Key reduction for baked rotation curves.

Blender evaluates LINEAR quaternion F-curves component-wise and normalises the result
when it builds the pose matrix, so between two kept keys a and b the played rotation at
fraction s is nlerp(a, b, s). Ramer–Douglas–Peucker (Ramer 1972; Douglas & Peucker
1973) with that interpolant and the geodesic angle as the distance keeps every frame's
rotation within the tolerance of the every-frame bake.
"""

import numpy as np

from . import quat


def keep_mask(q, tolerance_rad):
    """Boolean mask (F,) of the keys to keep for one bone's rotations q (F, 4), w-first.

    The first and last keys are always kept. With the kept keys and linear F-curve
    interpolation, every frame stays within `tolerance_rad` (rad, > 0) of q.
    Raises ValueError for a non-positive tolerance or fewer than 2 frames.
    """
    q = np.asarray(q, dtype=float)
    if tolerance_rad <= 0:
        raise ValueError("tolerance must be positive")
    if q.ndim != 2 or q.shape[1] != 4 or len(q) < 2:
        raise ValueError("q must have shape (F, 4) with F >= 2")
    keep = np.zeros(len(q), bool)
    keep[[0, -1]] = True
    stack = [(0, len(q) - 1)]
    while stack:
        i, j = stack.pop()
        if j - i < 2:
            continue
        s = (np.arange(i + 1, j) - i) / (j - i)
        played = quat.normalize((1.0 - s)[:, None] * q[i] + s[:, None] * q[j])
        err = quat.angle_between(played, q[i + 1:j])
        k = int(np.argmax(err))
        if err[k] > tolerance_rad:
            m = i + 1 + k
            keep[m] = True
            stack += [(i, m), (m, j)]
    return keep
