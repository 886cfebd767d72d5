"""The retarget math on arrays (solver/retarget/transfer_math.py), without Blender."""
import numpy as np

from solver.core import kinematics, quat
from solver.retarget import bonemap
from solver.retarget import transfer_math


def _rest(rng, n):
    rest = np.tile(np.eye(4), (n, 1, 1))
    rest[:, :3, :3] = quat.to_matrix(quat.normalize(rng.normal(size=(n, 4))))
    rest[:, :3, 3] = rng.normal(size=(n, 3))
    return rest


def test_pose_matrices_follow_blenders_pose_model_for_any_bone_order(rng):
    """Bones listed children first: the result equals M_b = M_p · L_p⁻¹ · L_b · B_b
    computed bone by bone, and solver.core.kinematics on the parents-first order."""
    parents = [2, 0, -1, 1]                # 2 is the root, then 0, 1, 3
    sk = bonemap.Skeleton(["a", "b", "root", "c"], parents, np.zeros((4, 3)))
    rest = _rest(rng, 4)
    q = quat.normalize(rng.normal(size=(5, 4, 4)))
    basis = {b: quat.to_matrix(q[:, b]) for b in range(4)}
    loc = {2: rng.normal(size=(5, 3))}
    posed = transfer_math.pose_matrices(sk, rest, basis, loc)
    for b in (2, 0, 1, 3):
        local = np.tile(np.eye(4), (5, 1, 1))
        local[:, :3, :3] = basis[b]
        if b in loc:
            local[:, :3, 3] = loc[b]
        p = parents[b]
        want = (posed[p] @ np.linalg.inv(rest[p]) if p >= 0 else np.eye(4)) @ rest[b] @ local
        np.testing.assert_allclose(posed[b], want, atol=1e-12)
    order = [2, 0, 1, 3]
    locations = np.zeros((5, 4, 3))
    locations[:, 0] = loc[2]
    direct = kinematics.pose_matrices([-1, 0, 1, 2], rest[order], locations, q[:, order], np.ones((5, 4, 3)))
    np.testing.assert_allclose(np.stack([posed[b] for b in order], 1), direct, atol=1e-12)


def test_swing_takes_a_onto_b_including_antiparallel(rng):
    a = transfer_math._unit(rng.normal(size=(50, 3)))
    b = transfer_math._unit(rng.normal(size=(50, 3)))
    b[0] = -a[0]                           # the half-turn branch
    r = transfer_math._swing(a, b)
    np.testing.assert_allclose(np.einsum("kij,kj->ki", r, a), b, atol=1e-9)
    np.testing.assert_allclose(r @ np.swapaxes(r, -1, -2), np.broadcast_to(np.eye(3), r.shape), atol=1e-9)
    np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-9)


def test_wahba_recovers_a_known_rotation(rng):
    d_t = transfer_math._unit(rng.normal(size=(4, 3)))
    truth = quat.to_matrix(quat.normalize(rng.normal(size=(3, 4))))   # (F, 3, 3)
    d_s = np.einsum("fij,kj->fki", truth, d_t)
    np.testing.assert_allclose(transfer_math._wahba(d_t, d_s), truth, atol=1e-9)


def test_detached_feet_are_found_from_geometry_not_names():
    """Legs ending at the shin (the robot's) with IK feet and knee poles hanging from no
    body bone: each leg's IK foot is found, on its own side, the pole never, whatever the
    names; a leg with its own foot bone gets none."""
    from humanoid import Humanoid
    h = Humanoid(ik_helpers=True)
    drop = {h.index(p, s) for p in ("foot", "toe") for s in ("L", "R")}
    keep = [i for i in range(len(h.names)) if i not in drop]
    new = {old: k for k, old in enumerate(keep)}
    parents = [new[h.parents[i]] if h.parents[i] >= 0 else -1 for i in keep]
    heads, tails = h.heads[keep], h.tails[keep]
    sk = bonemap.Skeleton([f"Node_{k}" for k in range(len(keep))], parents, heads, tails)
    found = transfer_math.detached_feet(sk, bonemap.analyse(sk), heads)
    assert {side: h.names[keep[i]] for side, i in found.items()} == {"L": "IK_foot.L", "R": "IK_foot.R"}
    full = bonemap.Skeleton(h.names, h.parents, h.heads, h.tails)
    assert transfer_math.detached_feet(full, bonemap.analyse(full), h.heads) == {}


def test_chain_in_world_on_a_subset_or_with_kept_relatives_is_the_same_walk(rng):
    """kinematics.chain as retarget.contact_transfer.Target.pose calls it: world matrices,
    only some bones (the others zero), relative rest matrices the caller keeps."""
    parents = np.array([-1, 0, 1, 0])
    rest = _rest(rng, 4)
    local = np.tile(np.eye(4), (3, 4, 1, 1))
    local[..., :3, :3] = quat.to_matrix(quat.normalize(rng.normal(size=(3, 4, 4))))
    world = _rest(rng, 1)[0]
    plain = kinematics.chain(parents, rest, local)
    np.testing.assert_allclose(kinematics.chain(parents, rest, local, world=world), world @ plain, atol=1e-12)
    relative = np.array([rest[i] if p < 0 else np.linalg.inv(rest[p]) @ rest[i] for i, p in enumerate(parents)])
    np.testing.assert_array_equal(kinematics.chain(parents, rest, local, relative=relative), plain)
    order = [0, 3]
    part = kinematics.chain(parents, rest, local[:, order], order=order)
    np.testing.assert_array_equal(part[:, order], plain[:, order])
    assert not part[:, [1, 2]].any()
