"""Contact holds eased in and out (solver/physics/contact_ramps.py): the intended
contacts' depth allowances and the blend towards the reference on a hold's ramps."""
import numpy as np

from solver.core import quat
from solver.physics import contact_ramps
from solver.physics.contact_depths import pair_depth
from solver.physics.guard import RAMP_S, contact_hold, towards_reference

FPS = 30.0


def _motion(rigs, model, n_frames, seed):
    rng = np.random.default_rng(seed)
    a, b = rigs.random_pose(model, rng), rigs.random_pose(model, rng)
    t = np.linspace(0.0, 1.0, n_frames)[:, None]
    return np.stack([quat.slerp(a, b, np.full(model.n_bones, s)) for s in t[:, 0]])


def test_intended_contacts_span_the_contact_and_its_ramps_at_the_references_depth(rigs):
    model = rigs.branched_model()
    ref = rigs.motion_reference(_motion(rigs, model, 40, 1), FPS)
    contacts = [{"index": [4, 7], "start": 10, "stop": 20}, {"index": [1, 2, 4], "start": 0, "stop": 5}]
    out = contact_ramps.intended_contacts(model, ref, (), contacts, 1.0 / FPS)
    ramp = int(round(RAMP_S * FPS))
    depth = pair_depth(model, ref.rotations[10:20], ref.base_positions[10:20], ref.base_rotations[10:20], (), 4, 7)
    assert out == [(4, 7, 10 - ramp, 20 + ramp, float(depth.max(initial=0.0)))]  # three bones: not a pair


def test_without_ramp_frames_the_bake_is_the_hold_applied_as_is(rigs):
    model = rigs.branched_model()
    ref = rigs.motion_reference(_motion(rigs, model, 24, 2), FPS)
    sim = _motion(rigs, model, 24, 3)
    hold = np.zeros((24, model.n_bones))
    hold[5:9, :3] = 1.0
    out = contact_ramps.smooth_ramps(model, ref, (), sim, hold, [], None, np.array([4, 7]))
    np.testing.assert_array_equal(out, towards_reference(sim, ref.rotations, hold))


def test_ramps_blend_between_simulation_and_reference_within_bounds(rigs):
    model = rigs.branched_model()
    n = 40
    ref = rigs.motion_reference(_motion(rigs, model, n, 4), FPS)
    sim = _motion(rigs, model, n, 5)
    hold = contact_hold(model, n, [(np.array([4]), 15, 25)], 1.0 / FPS, 0.2)
    assert ((hold > 0) & (hold < 1)).any()
    out = contact_ramps.smooth_ramps(model, ref, (), sim, hold, [], None, np.array([4, 7]))
    assert out.shape == sim.shape and np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, atol=1e-12)
    held = hold >= 1.0
    # on the contact's own frames the held bones are the reference's (up to the sign of q)
    dots = np.abs(np.sum(out[held] * ref.rotations[held], axis=-1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-9)
    free = ~(hold > 0.0).any(axis=1)
    dots = np.abs(np.sum(out[free] * sim[free], axis=-1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-9)  # frames without a hold stay the simulation's
