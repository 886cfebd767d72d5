"""simulate(): settings, presets, schedule multiplier, progress and result shapes."""

import numpy as np
import pytest

from solver.core import quat
from solver.core.settings import PRESETS
from solver.physics.simulate import GroupGains, SimSettings, dof_gains, simulate


def _clip(rigs):
    model = rigs.hand()
    t = np.arange(31) / 30
    curl = np.outer(0.5 * (1 - np.cos(2 * np.pi * 3 * t)), [1.6, 1.8, 1.6])
    return model, rigs.motion_reference(rigs.fist_rotations(model, curl), 30)


def test_result_shapes_units_and_continuity(rigs):
    model, ref = _clip(rigs)
    res = simulate(model, ref)
    n = len(ref.times)
    assert res.rotations.shape == (n, model.n_bones, 4) and res.velocities.shape == (n, model.n_dof)
    for a in (res.penetration_mm, res.substeps, res.fallback_level, res.energy, res.contact_stiffness):
        assert a.shape == (n,)
    assert res.substeps[0] == 0 and np.all(res.substeps[1:] >= 2)
    np.testing.assert_allclose(np.linalg.norm(res.rotations, axis=-1), 1.0, atol=1e-12)
    assert np.all(np.sum(res.rotations[1:] * res.rotations[:-1], axis=-1) > 0)  # hemisphere-continuous
    # Hinges only ever rotate about their local X axis.
    np.testing.assert_allclose(res.rotations[:, model.hinge, 2:], 0.0, atol=1e-15)


def test_presets_scale_the_group_frequencies(rigs):
    model = rigs.hand()
    omegas = {name: dof_gains(model, SimSettings.preset(name))[0] for name in PRESETS}
    assert np.all(omegas["soft"] < omegas["default"]) and np.all(omegas["default"] < omegas["stiff"])
    np.testing.assert_allclose(omegas["stiff"] / omegas["default"], PRESETS["stiff"].frequency_scale)
    custom = SimSettings(group_gains={"fingers": GroupGains(20.0, 0.5)}, default_gains=GroupGains(3.0))
    omega, zeta = dof_gains(model, custom)
    assert omega[0] == pytest.approx(2 * np.pi * 3.0) and omega[-1] == pytest.approx(2 * np.pi * 20.0)
    assert zeta[-1] == 0.5
    with pytest.raises(ValueError):
        SimSettings.preset("wobbly")


def test_stiffness_multiplier_scales_the_contact_stiffness(rigs):
    model, ref = _clip(rigs)
    n = len(ref.times)
    curve = np.linspace(1.0, 3.0, n)
    res = simulate(model, ref, SimSettings(schedule=False, stiffness_multiplier=curve))
    np.testing.assert_allclose(res.contact_stiffness, SimSettings().contact_stiffness * curve)


def test_progress_reports_every_frame_and_can_abort(rigs):
    model, ref = _clip(rigs)
    seen = []
    simulate(model, ref, progress=seen.append)
    assert len(seen) == len(ref.times) - 1 and seen[-1] == 1.0 and np.all(np.diff(seen) > 0)

    def stop(fraction):
        if fraction > 0.2:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        simulate(model, ref, progress=stop)


@pytest.mark.parametrize("bad", [dict(max_substeps=3), dict(max_tunnel_substeps=2), dict(tolerance=0.0),
                                 dict(k_min=10.0, k_max=1.0), dict(contact_stiffness=np.nan),
                                 dict(stiffness_multiplier=np.ones(3)),
                                 dict(group_gains={"fingers": GroupGains(-1.0)})])
def test_inconsistent_settings_are_rejected(rigs, bad):
    model, ref = _clip(rigs)
    with pytest.raises(ValueError):
        simulate(model, ref, SimSettings(**bad))


def test_reference_must_match_the_model(rigs):
    model, _ = _clip(rigs)
    ref = rigs.static_reference(rigs.branched_model(), np.tile(quat.IDENTITY, (8, 1)), 5, 30)
    with pytest.raises(ValueError):
        simulate(model, ref)


def test_a_dip_of_the_reference_path_between_two_clear_keys_is_allowed_there_only():
    """Two sibling capsules 10 cm apart (r 2 cm); the second turns 180° about Z within one
    frame, so the C² path through its two clear keys sweeps its tip through the first
    capsule mid-interval. The targets between those keys allow exactly the path's depth
    beyond the keys' (measured here with contacts.capsule_contacts on the target pose);
    at every frame and on every other interval the allowance is none."""
    from solver.physics.capsule_contacts import capsule_contacts
    from solver.core.kinematics import capsule_segments, forward_kinematics
    from solver.core.model import SkeletonModel
    from solver.physics.reference import Reference
    from solver.physics.simulate import ReferenceTrack
    model = SkeletonModel(parents=[-1, -1], rest_offsets=[[0, 0, 0], [0.1, 0, 0]], rest_rotations=[quat.IDENTITY] * 2,
                          joint_types=["ball"] * 2, capsule_radius=[0.02] * 2, capsule_length=[0.1] * 2,
                          groups=["a"] * 2)
    angle = np.radians([0.0, 0.0, 180.0, 180.0])
    rot = np.stack([np.tile(quat.IDENTITY, (4, 1)), quat.exp(np.stack([0 * angle, 0 * angle, angle], -1))], 1)
    ref = Reference(np.arange(4) / 30, rot, np.zeros((4, 3)), np.tile(quat.IDENTITY, (4, 1)))
    grid = 8
    track = ReferenceTrack(model, ref, grid, fields=())
    allowed = []
    for index in range(3 * grid + 1):
        target = track.at_index(index)
        kin = forward_kinematics(model, target.rotations[None], target.base_rotation[None],
                                 target.base_position[None])
        c = capsule_contacts(model, capsule_segments(model, kin)[0])
        depth = max(c.depth.max(initial=0.0), 0.0)  # the keys are clear: all of it is the path's dip
        if index % grid == 0 or index // grid != 1:
            assert target.allowance is None and depth == 0.0, index
        elif depth == 0.0:
            assert target.allowance is None, index
        else:
            assert target.allowance[0] == pytest.approx(depth, rel=1e-9)
            allowed.append(depth)
    assert max(allowed) == pytest.approx(0.04)  # the axes cross: r₁ + r₂
