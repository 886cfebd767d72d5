"""Skeleton model: a kinematic tree of capsule bones hanging from a kinematic base.

Conventions follow Blender pose bones: each bone's frame has its origin at the bone
head and its Y axis along the bone; the world frame of bone i is

    R_i = R_parent · R_rest,i · R_pose,i,    p_i = p_parent + R_parent · offset_i,

where `offset_i` is the head position in the parent's frame and R_pose,i is the local
pose rotation the animator keys. Parent -1 means the kinematic base (the chest).
Ball joints have 3 DOF (angular velocity in the bone's own frame); hinges have 1 DOF
about the bone's local X axis (Blender's curl axis).
"""

from dataclasses import dataclass

import numpy as np

from . import quat
from .capsule_pairs import rest_filtered_pairs

BALL = "ball"
HINGE = "hinge"
TISSUE_DENSITY = 1050.0  # kg/m³, soft tissue


def capsule_mass_properties(radius, length, density=TISSUE_DENSITY):
    """Mass (n,) kg, centre of mass (n, 3) m and inertia about it (n, 3, 3) kg·m², bone-local.

    The capsule runs from the bone head along local +Y for `length` (m) with radius
    `radius` (m): a cylinder plus two hemispherical caps (cap COM 3r/8 from its flat
    face, own inertia 83/320 m r² about a diameter, shifted by the parallel-axis rule).
    """
    r = np.asarray(radius, dtype=float)
    L = np.asarray(length, dtype=float)
    m_cyl = density * np.pi * r ** 2 * L
    m_cap = density * (2.0 / 3.0) * np.pi * r ** 3
    mass = m_cyl + 2.0 * m_cap
    i_axial = 0.5 * m_cyl * r ** 2 + 2.0 * m_cap * 0.4 * r ** 2
    i_perp = (m_cyl * (L ** 2 / 12.0 + r ** 2 / 4.0)
              + 2.0 * m_cap * (0.4 * r ** 2 + L ** 2 / 4.0 + 3.0 * L * r / 8.0))
    com = np.zeros(r.shape + (3,))
    com[..., 1] = 0.5 * L
    inertia = np.zeros(r.shape + (3, 3))
    inertia[..., 0, 0] = i_perp
    inertia[..., 1, 1] = i_axial
    inertia[..., 2, 2] = i_perp
    return mass, com, inertia


def _array(name, value, shape, allow_inf=False):
    a = np.array(value, dtype=float)
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
    ok = ~np.isnan(a) if allow_inf else np.isfinite(a)
    if not np.all(ok):
        raise ValueError(f"{name} contains NaN or infinite values")
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class SkeletonModel:
    """Immutable skeleton built from arrays (n = n_bones, bones ordered parents first).

    Fields:
        parents (n,) int: parent bone index, -1 for children of the kinematic base.
        rest_offsets (n, 3) m: bone head in the parent's frame (base frame for -1).
        rest_rotations (n, 4): rest frame relative to the parent's frame, w-first.
        joint_types (n,) str: "ball" (3 DOF) or "hinge" (1 DOF about local X).
        capsule_radius (n,) m, > 0; capsule_length (n,) m, ≥ 0 (head → tail along +Y).
        groups (n,) str: joint-group label per bone (gains are set per group).
        limit_lower, limit_upper (n, 3) rad: bounds on the components of the local
            rotation vector log(q_pose) (hinges use column 0); ±inf for none. Default none.
        collide (n,) bool: whether the bone's capsule takes part in contacts. Default all.
        no_contact (k, 2) int: further bone pairs that never collide (a forearm's end cap,
            which reaches past the wrist, and the fingers of its own hand). Default none.
        names (n,) str: optional bone names (for reports only).
        density kg/m³: tissue density for masses (default 1050).

    Derived (read-only attributes): n_bones, n_dof; mass (n,) kg, com_local (n, 3) m,
    inertia_local (n, 3, 3) kg·m² from the capsules; the DOF layout — bone b owns DOFs
    dof_start[b] … dof_start[b] + dof_count[b] − 1, DOF d is axis dof_axis[d] (0 = X)
    of bone dof_bone[d], so velocities (n_dof,) are per-bone angular velocities in the
    bone frame (ball: x, y, z; hinge: x); dof_parent (n_dof,) the DOF tree (the previous
    DOF of the bone, else the parent bone's last, −1 for none: mass and implicit
    matrices are nonzero only between a DOF and its tree ancestors); dof_lower/dof_upper
    (n_dof,) rad; hinge (n,) bool; ancestors (n, n), 1 where column j is row i or its ancestor; pairs
    (n_pairs, 2) capsule pairs that may collide (contacts.rest_filtered_pairs); and
    precomputed index tables used by the contact tests.

    Raises ValueError on inconsistent shapes, NaN, unknown joint types, bad parent order.
    """

    parents: np.ndarray
    rest_offsets: np.ndarray
    rest_rotations: np.ndarray
    joint_types: tuple
    capsule_radius: np.ndarray
    capsule_length: np.ndarray
    groups: tuple
    limit_lower: np.ndarray = None
    limit_upper: np.ndarray = None
    collide: np.ndarray = None
    names: tuple = None
    no_contact: np.ndarray = None
    density: float = TISSUE_DENSITY

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731  (frozen dataclass)
        parents = np.array(self.parents, dtype=np.intp)
        if parents.ndim != 1 or parents.size == 0:
            raise ValueError("parents must be a non-empty 1-D integer array")
        n = parents.size
        if np.any(parents < -1) or np.any(parents >= np.arange(n)):
            raise ValueError("parents must satisfy -1 <= parents[i] < i (parents before children)")
        parents.flags.writeable = False
        put("parents", parents)
        put("rest_offsets", _array("rest_offsets", self.rest_offsets, (n, 3)))
        rr = _array("rest_rotations", self.rest_rotations, (n, 4))
        rr = quat.normalize(rr)
        rr.flags.writeable = False
        put("rest_rotations", rr)
        types = tuple(str(t) for t in self.joint_types)
        if len(types) != n or any(t not in (BALL, HINGE) for t in types):
            raise ValueError(f"joint_types must be {n} entries of '{BALL}' or '{HINGE}'")
        put("joint_types", types)
        radius = _array("capsule_radius", self.capsule_radius, (n,))
        length = _array("capsule_length", self.capsule_length, (n,))
        if np.any(radius <= 0) or np.any(length < 0):
            raise ValueError("capsule radii must be > 0 and lengths >= 0")
        put("capsule_radius", radius)
        put("capsule_length", length)
        groups = tuple(str(g) for g in self.groups)
        if len(groups) != n:
            raise ValueError(f"groups must have {n} labels")
        put("groups", groups)
        lo = np.full((n, 3), -np.inf) if self.limit_lower is None else self.limit_lower
        hi = np.full((n, 3), np.inf) if self.limit_upper is None else self.limit_upper
        lo = _array("limit_lower", lo, (n, 3), allow_inf=True)
        hi = _array("limit_upper", hi, (n, 3), allow_inf=True)
        if np.any(lo > hi):
            raise ValueError("joint limits must have lower <= upper")
        put("limit_lower", lo)
        put("limit_upper", hi)
        collide = np.ones(n, bool) if self.collide is None else np.array(self.collide, dtype=bool)
        if collide.shape != (n,):
            raise ValueError(f"collide must have shape ({n},)")
        collide.flags.writeable = False
        put("collide", collide)
        skip = np.zeros((n, n), bool)
        if self.no_contact is not None and len(self.no_contact):
            nc = np.array(self.no_contact, dtype=np.intp).reshape(-1, 2)
            skip[nc[:, 0], nc[:, 1]] = skip[nc[:, 1], nc[:, 0]] = True
        skip.flags.writeable = False
        put("no_contact_mask", skip)
        if self.names is not None:
            if len(self.names) != n:
                raise ValueError(f"names must have {n} entries")
            put("names", tuple(str(s) for s in self.names))
        if not (np.isfinite(self.density) and self.density > 0):
            raise ValueError("density must be a positive finite number")

        put("n_bones", n)
        mass, com, inertia = capsule_mass_properties(radius, length, self.density)
        put("mass", mass)
        put("com_local", com)
        put("inertia_local", inertia)
        put("rest_matrices", quat.to_matrix(rr))
        # Capsule constants the compiled dynamics read (kernels.py): COM height on Y, i⊥, i_axial.
        put("com_y", np.ascontiguousarray(com[:, 1]))
        put("inertia_perp", np.ascontiguousarray(inertia[:, 0, 0]))
        put("inertia_axial", np.ascontiguousarray(inertia[:, 1, 1]))
        counts = np.array([3 if t == BALL else 1 for t in types], dtype=np.intp)
        start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        n_dof = int(counts.sum())
        dof_bone = np.repeat(np.arange(n), counts)
        dof_axis = np.arange(n_dof) - start[dof_bone]
        put("n_dof", n_dof)
        put("dof_start", start)
        put("dof_count", counts)
        put("dof_bone", dof_bone)
        put("dof_axis", dof_axis)
        put("dof_flat", dof_bone * 3 + dof_axis)  # index into a flattened (n, 3) array
        # The DOF tree: the previous DOF of the same bone, else the parent bone's last (−1: none).
        last = start + counts - 1
        put("dof_parent", np.where(dof_axis > 0, np.arange(n_dof) - 1,
                                   np.where(parents[dof_bone] >= 0, last[np.maximum(parents[dof_bone], 0)], -1)))
        put("dof_lower", lo[dof_bone, dof_axis])
        put("dof_upper", hi[dof_bone, dof_axis])
        put("hinge", np.array([t == HINGE for t in types]))

        anc = np.zeros((n, n))
        for i in range(n):
            if parents[i] >= 0:
                anc[i] = anc[parents[i]]
            anc[i, i] = 1.0
        put("ancestors", anc)
        put("children_count", np.bincount(parents[parents >= 0], minlength=n))

        for name in ("mass", "com_y", "inertia_perp", "inertia_axial", "rest_matrices", "dof_start", "dof_count",
                     "dof_bone", "dof_axis", "dof_parent"):
            getattr(self, name).flags.writeable = False  # one compiled signature per kernel
        pairs = rest_filtered_pairs(self)
        put("pairs", pairs)
        put("pair_min_radius", np.minimum(radius[pairs[:, 0]], radius[pairs[:, 1]]))
        put("pair_i", np.ascontiguousarray(pairs[:, 0]))
        put("pair_j", np.ascontiguousarray(pairs[:, 1]))
        put("pair_radius_sum", radius[pairs[:, 0]] + radius[pairs[:, 1]])
        put("pair_radius_diff", radius[pairs[:, 1]] - radius[pairs[:, 0]])
        put("pair_reach", (0.5 * length + radius)[pairs].sum(axis=1))
        put("pair_half_min_radius", 0.5 * self.pair_min_radius)

    def bones_in_group(self, group):
        """Indices (k,) of the bones whose label is `group`."""
        return np.array([i for i, g in enumerate(self.groups) if g == group], dtype=np.intp)
