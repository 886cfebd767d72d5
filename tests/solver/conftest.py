"""Small skeletons shared by the solver tests, handed out by the `rigs` fixture."""

from types import SimpleNamespace

import numpy as np
import pytest

from solver.core import quat
from solver.core.model import SkeletonModel
from solver.physics.reference import Reference


def branched_model(seed=0):
    """Random 8-bone tree with two branches off the base and a fork, ball and hinge joints."""
    rng = np.random.default_rng(seed)
    parents = [-1, 0, 1, 1, 3, -1, 5, 6]
    types = ["ball", "hinge", "ball", "hinge", "ball", "ball", "hinge", "hinge"]
    n = len(parents)
    return SkeletonModel(parents=parents, rest_offsets=rng.normal(size=(n, 3)) * 0.1,
                         rest_rotations=quat.normalize(rng.normal(size=(n, 4))), joint_types=types,
                         capsule_radius=rng.uniform(0.01, 0.03, n), capsule_length=rng.uniform(0.05, 0.2, n),
                         groups=["a"] * n)


def random_pose(model, rng):
    """Random local rotations (n_bones, 4) respecting hinge axes."""
    q = quat.normalize(rng.normal(size=(model.n_bones, 4)))
    angle = rng.uniform(-2, 2, int(model.hinge.sum()))
    q[model.hinge] = quat.exp(np.stack([angle, 0 * angle, 0 * angle], -1))
    return q


# Rest rotation that turns a bone's +Y (along the bone) to world −Z: a hanging bone.
HANG = quat.exp(np.array([-np.pi / 2, 0.0, 0.0]))


def pendulum(length=1.0, radius=0.02, group="p"):
    """One hinge bone hanging from a fixed base; it swings in the world Y–Z plane."""
    return SkeletonModel(parents=[-1], rest_offsets=[[0.0, 0.0, 0.0]], rest_rotations=[HANG],
                         joint_types=["hinge"], capsule_radius=[radius], capsule_length=[length], groups=[group])


def hinge_reference(angles, fps):
    """Reference for single-hinge models: angles (n_frames,) rad about local X, fixed base."""
    angles = np.asarray(angles, dtype=float)
    n = len(angles)
    rot = quat.exp(np.stack([angles, 0 * angles, 0 * angles], -1))[:, None, :]
    return Reference(np.arange(n) / fps, rot, np.zeros((n, 3)), np.tile(quat.IDENTITY, (n, 1)))


def static_reference(model, rotations, n_frames, fps, **face):
    """Reference holding `rotations` (n_bones, 4) for n_frames, fixed base at the origin."""
    return motion_reference(np.broadcast_to(rotations, (n_frames,) + np.shape(rotations)), fps, **face)


def motion_reference(rotations, fps, **face):
    """Reference of local rotations (n_frames, n_bones, 4) at fps, fixed base at the origin."""
    n = len(rotations)
    return Reference(np.arange(n) / fps, rotations, np.zeros((n, 3)), np.tile(quat.IDENTITY, (n, 1)), **face)


FINGER_X = (-0.03, -0.01, 0.01, 0.03)


def hand(limits=True):
    """Palm capsule along +Y (8 cm, r 15 mm) on a ball joint, four fingers of three
    phalanges (ball, hinge, hinge; r 8 mm, 4 mm apart) continuing along +Y.
    Positive curl about X turns a finger towards +Z, the palm side."""
    parents, offsets, types, radius, length, groups = [-1], [[0, 0, 0]], ["ball"], [0.015], [0.08], ["wrist"]
    for x in FINGER_X:
        parent = 0
        for k, (l_k, off) in enumerate(zip((0.045, 0.027, 0.022), ((x, 0.08, 0), (0, 0.045, 0), (0, 0.027, 0)))):
            parents.append(parent)
            offsets.append(off)
            types.append("ball" if k == 0 else "hinge")
            radius.append(0.008)
            length.append(l_k)
            groups.append("fingers")
            parent = len(parents) - 1
    n = len(parents)
    lower = np.full((n, 3), -np.inf)
    upper = np.full((n, 3), np.inf)
    if limits:
        lower[1:], upper[1:] = (-0.2, -0.3, -0.3), (1.9, 0.3, 0.3)
    return SkeletonModel(parents=parents, rest_offsets=offsets, rest_rotations=np.tile(quat.IDENTITY, (n, 1)),
                         joint_types=types, capsule_radius=radius, capsule_length=length, groups=groups,
                         limit_lower=lower, limit_upper=upper)


def fist_rotations(model, curl):
    """Local rotations (n, n_bones, 4) curling every finger joint by curl (n, 3) rad."""
    curl = np.asarray(curl, dtype=float)
    rv = np.zeros((len(curl), model.n_bones, 3))
    for f in range(4):
        rv[:, 1 + 3 * f: 4 + 3 * f, 0] = curl
    return quat.exp(rv)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def rigs():
    return SimpleNamespace(branched_model=branched_model, random_pose=random_pose, pendulum=pendulum,
                           hinge_reference=hinge_reference, static_reference=static_reference,
                           motion_reference=motion_reference, HANG=HANG,
                           hand=hand, fist_rotations=fist_rotations)
