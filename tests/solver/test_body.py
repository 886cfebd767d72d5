"""Body volumes (solver.core.body_volumes) and joints fitted to the reference (limits.fit_to_reference)."""
import numpy as np
import pytest

from solver.core import body_volumes, quat, sdf
from solver.physics import contact_depths, joint_limits


def test_limits_widen_to_cover_the_reference_and_report_it(rigs):
    model = rigs.hand()
    curl = np.linspace(0.0, 2.3, 30)  # past the 1.9 rad curl limit of every joint
    rot = rigs.fist_rotations(model, np.stack([curl] * 3, -1))
    assert joint_limits.limit_excess(model, rot).max() > 0.3
    fitted, widened, freed = joint_limits.fit_to_reference(model, rot)
    assert joint_limits.limit_excess(fitted, rot).max() == 0.0
    assert freed == []
    widened_bones = {b for b, a, _before, _after in widened}
    assert widened_bones == set(range(1, model.n_bones))
    for b, a, before, after in widened:
        assert a == 0 and before == (-0.2, 1.9)
        assert after[1] == pytest.approx(2.3 + joint_limits.LIMIT_MARGIN, abs=1e-9)
    # inside the limits nothing changes (the same model comes back)
    inside = rigs.fist_rotations(model, np.full((5, 3), 0.5))
    assert joint_limits.fit_to_reference(model, inside)[0] is model


def test_a_hinge_whose_reference_leaves_its_axis_becomes_a_ball(rigs):
    model = rigs.hand()
    rv = np.zeros((20, model.n_bones, 3))
    rv[:, 2, 0] = np.linspace(0, 1.0, 20)
    rv[:, 2, 2] = np.linspace(0, 0.3, 20)  # the middle phalanx of finger 1 also spreads
    rot = quat.exp(rv)
    fitted, _widened, freed = joint_limits.fit_to_reference(model, rot)
    assert freed == [2] and fitted.joint_types[2] == "ball" and model.joint_types[2] == "hinge"
    assert fitted.n_dof == model.n_dof + 2
    assert joint_limits.limit_excess(fitted, rot).max() == 0.0


def test_open_mesh_kept_triangles_and_hull_orientation():
    v, t = sdf.icosphere(2, 0.05)
    keep = v[:, 2] < 0.03
    sv, st = body_volumes.submesh(v, t, keep)
    assert np.all(sv[:, 2] < 0.03) and len(st) < len(t) and st.max() < len(sv)
    hv, ht = body_volumes.convex_hull_mesh(v + [0.1, 0, 0])
    assert sdf.is_closed(ht)
    assert sdf.mesh_signed_distance(hv, ht, np.array([[0.1, 0, 0]]))[0] == pytest.approx(-0.05, abs=2e-3)


def test_plate_samples_span_a_flat_box_at_its_half_thickness():
    v, t = body_volumes.box_mesh((-0.04, 0.0, -0.01), (0.04, 0.09, 0.01))
    centres, radius = body_volumes.plate_samples(v)
    assert radius == pytest.approx(0.01)
    assert np.allclose(centres[:, 2], 0.0)
    # a thick palm: layers of thinner spheres reaching its faces
    thick, r = body_volumes.plate_samples(body_volumes.box_mesh((-0.04, 0.0, -0.025), (0.04, 0.09, 0.025))[0])
    assert r == pytest.approx(0.025 / 3) and sorted(set(np.round(thick[:, 2], 9))) == pytest.approx(
        [-0.025 + r, 0.0, 0.025 - r])
    assert centres[:, 0].min() == pytest.approx(-0.03) and centres[:, 1].max() == pytest.approx(0.08)
    # the box inset by a radius at its rim is covered: every point is within the
    # sphere of a sample enlarged by the half-diagonal of a sample cell (r/√2 in plane)
    rng = np.random.default_rng(0)
    p = rng.uniform((-0.03, 0.01, -0.01), (0.03, 0.08, 0.01), (500, 3))
    d = np.linalg.norm(p[:, None] - centres[None], axis=-1).min(axis=1)
    assert d.max() <= radius * np.sqrt(1 + 0.5) + 1e-9


def test_region_owner_sums_the_weights_of_a_region():
    # vertex 0: head 0.4 + neck 0.3 beats chest 0.3; vertex 1: no region above 0.5
    owner = body_volumes.region_owner(2, [0, 0, 0, 1, 1], [0, 1, 2, 0, 2], [0.4, 0.3, 0.3, 0.45, 0.45], [0, 0, 1])
    assert owner.tolist() == [0, -1]


def test_an_intended_contact_counts_only_beyond_its_own_depth():
    """Two capsules (r = 10 mm, 0.1 m long, 30 mm apart at rest); the second tilted until
    its tip is 15 mm from the first's axis (5 mm overlap) on three frames. The contact is
    intended on frames 0–1 at the 5 mm its pose has: it counts 0 there and 5 mm on
    frame 2; pair_depth gives the overlap itself."""
    from solver.core.model import SkeletonModel
    model = SkeletonModel(parents=[-1, -1], rest_offsets=[[0, 0, 0], [0.03, 0, 0]],
                          rest_rotations=[quat.IDENTITY] * 2, joint_types=["ball"] * 2,
                          capsule_radius=[0.01, 0.01], capsule_length=[0.1, 0.1], groups=["a", "b"])
    rot = np.tile(quat.IDENTITY, (3, 2, 1))
    rot[:, 1] = quat.exp(np.array([0.0, 0.0, np.arcsin(0.15)]))  # tip x = 0.03 − 0.1 sin θ = 0.015
    base = np.zeros((3, 3)), np.tile(quat.IDENTITY, (3, 1))
    pair = contact_depths.pair_depth(model, rot, *base, (), 0, 1)
    np.testing.assert_allclose(pair, 0.005, atol=1e-12)
    plain = contact_depths.contact_depths(model, rot, *base)["capsule"]
    kept = contact_depths.contact_depths(model, rot, *base, intended=[(1, 0, 0, 2, 0.005)])["capsule"]
    np.testing.assert_allclose(plain, 0.005, atol=1e-12)
    np.testing.assert_allclose(kept, [0.0, 0.0, 0.005], atol=1e-12)
    deeper = contact_depths.contact_depths(model, rot, *base, intended=[(0, 1, 0, 3, 0.002)])["capsule"]
    np.testing.assert_allclose(deeper, 0.003, atol=1e-12)  # beyond the intended depth still counts


def test_skin_agreement_counts_frames_where_one_side_is_deeper_than_the_other():
    """Per kind present on both sides: frames where the model is deeper than the skin by
    more than the tolerance (those clear on the skin counted apart) and the largest
    model − skin there; the same the other way."""
    model = {"hand–hand": np.array([0.0, 0.0015, 0.0005, 0.004, 0.003]),
             "finger–finger": np.array([0.002, 0.0, 0.0, 0.0, 0.0]),
             "arm–torso": np.array([0.05, 0.05, 0.05, 0.05, 0.05])}  # not on the skin: not compared
    skin = {"hand–hand": np.array([0.0, 0.0, 0.0, 0.001, 0.0045]),
            "finger–finger": np.array([0.0, 0.0008, 0.0, 0.0025, 0.0])}
    got = contact_depths.skin_agreement(model, skin, tolerance=1e-3)
    assert set(got) == {"hand–hand", "finger–finger"}
    # hand–hand: frame 1 clear on the skin, 1.5 mm in the model; frame 3: 1 mm on the skin,
    # 4 mm in the model (3 mm deeper); frame 4: the skin 1.5 mm deeper than the model
    assert got["hand–hand"] == {"model_deeper_frames": 2, "clear_frames": 1, "model_excess": pytest.approx(0.003),
                                "skin_deeper_frames": 1, "skin_excess": pytest.approx(0.0015)}
    # finger–finger: frame 0 only in the model (2 mm); frame 3 only on the skin (2.5 mm);
    # frame 1's 0.8 mm on the skin is within the tolerance
    assert got["finger–finger"] == {"model_deeper_frames": 1, "clear_frames": 1, "model_excess": pytest.approx(0.002),
                                    "skin_deeper_frames": 1, "skin_excess": pytest.approx(0.0025)}
    assert contact_depths.skin_agreement({"hand–hand": np.zeros(3)}, {"hand–hand": np.zeros(3)})["hand–hand"] == {
        "model_deeper_frames": 0, "clear_frames": 0, "model_excess": 0.0, "skin_deeper_frames": 0,
        "skin_excess": 0.0}


def test_contact_kinds_name_the_two_parts():
    """One name per kind of contact, the same for the body model and the evaluated skin:
    a finger in its own palm is "finger–palm" (the palm volume's samples), not "finger–finger"."""
    kind = body_volumes.pair_kind
    assert kind("finger.R", "thumb.R") == kind("thumb.R", "finger.R") == "finger–finger"
    assert kind("thumb.L", "hand.L") == kind("hand.L", "finger.L") == "finger–palm"
    assert kind("finger.L", "hand.R") == kind("hand.L", "hand.R") == "hand–hand"
    assert kind("finger.R", "head") == kind("neck", "hand.L") == "hand–face"
    assert kind("arm.R", "hand.L") == "arm–hand" and kind("torso", "finger.R") == "hand–torso"
