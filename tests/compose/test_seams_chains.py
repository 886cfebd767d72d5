"""Seams of the long chains, measured on the output as test_seams.py does (Blender's
evaluated feet and bones): CMU's jump → bye → the dance → CMU (a foot landing inside a
window, feet held after a jump) and the walk loop of cmu_01_01 (frames 256–363 after
resampling to 30 fps: its two ends show nearly the same pose and velocities) chained ten
times, with and without the foot hold. Split from test_seams.py so each file runs in
well under a minute; SIGNSIM_SWEEP=1 (bench/bench_compose.py --seams) also runs these
chains through test_seams.py's checks over every seam."""
import bpy
import numpy as np
import pytest
from seams_measure import (BYE, CMU, DATA, FEET, GENERATED, JESSE, PLANT_BAND, PLANT_SPEED, _balls, compose_cases,
                           compose_walk, lowest, passing_window_skates, plant_run_slides, runs, window_skate)

pytestmark = pytest.mark.skipif(not (DATA.is_dir() and GENERATED.is_dir()),
                                reason=f"third-party test data not found at {DATA.parent}")


@pytest.fixture(scope="module")
def pairs(cm):
    """The jump-wave-dance chain (as in test_seams.py's pairs), every clip also composed
    alone, sampled frame by frame."""
    return compose_cases(cm, {"jump-wave-dance": [CMU, BYE, JESSE, CMU]})


@pytest.fixture(scope="module")
def walk(cm):
    """The walk loop chained ten times, with and without the foot hold, sampled."""
    return compose_walk(cm)


@pytest.mark.slow
def test_no_foot_skates_inside_a_passing_seam_of_the_jump_chain_and_its_windows_that_drag_feet_are_flagged(pairs):
    """test_seams.py's skate check on the jump-wave-dance chain: inside the window of a
    seam the product passes, no foot on the floor is dragged faster than a shuffle more
    than 1 cm beyond what the clips alone do there, and the chain's windows that drag feet
    more are flagged."""
    worst, flagged = passing_window_skates(pairs)
    print(f"\nlargest skate inside a passing window beyond the clips: {max(worst)[0] * 100:.2f} cm "
          f"({max(worst)[2]}); {flagged} feet skate more across flagged seams")
    assert max(worst)[0] <= 0.01, max(worst)
    assert flagged, "the jump-wave-dance chain drags feet inside its windows: flagged"


@pytest.mark.slow
def test_a_foot_landing_inside_a_window_is_held_from_touchdown(pairs):
    """Landing synthesis, on Blender's evaluated feet: a foot in the air as a window begins
    that lands inside it, where the next clip stands it within the hold's reach, is held
    from its touchdown (the blend dragged the left foot of dance → jump 19 cm along the
    floor before its hold began): it skates no more than 1 cm beyond the clips, and the
    report's plant begins by the touchdown."""
    fps = bpy.context.scene.render.fps / bpy.context.scene.render.fps_base
    for name, index, f in (("jump-wave-dance", 3, 0),):
        result, (_rot, heads, names), own = pairs[name]
        seam = result["seams"][index - 1]
        first = result["frames"][0]
        k = int(seam["frame"] - first)
        low = lowest(None, heads, names)[:, f]
        floor = float(np.percentile(lowest(None, heads, names), 5))
        on = np.flatnonzero(low[k:k + seam["window"] + 1] <= floor + PLANT_BAND)
        assert not low[k] <= floor + PLANT_BAND and len(on), f"{name} seam {index}: the foot lands in the window"
        touchdown = k + int(on[0])
        here, clips = window_skate(result, heads, names, own, seam, f, fps)
        print(f"\n{name} seam {index} {FEET[f]}: lands at frame {touchdown + first:g}, skates {here * 100:.2f} cm in "
              f"the window (the clips {clips * 100:.2f} cm)")
        assert here - clips <= 0.01
        plant = next(p for p in seam["plants"] if p["bone"] == FEET[f])
        assert plant["held"] and plant["frames"][0] <= touchdown + first
        assert FEET[f] not in [s["bone"] for s in seam["skating"]]


@pytest.mark.slow
def test_feet_held_after_a_jump_stand_on_the_floor_as_the_clips_do(pairs):
    """A hold that begins as a foot lands from a jump (CMU's jump, then bye; a fresh user
    found both feet frozen at their first landing frame, toes 15 mm and ankles 21-28 mm
    above where they stand, for 4.5 s): on Blender's evaluated feet the held toes and
    ankles stand at the heights above the floor that the next clip alone stands them at,
    within 5 mm."""
    result, (_rot, heads, names), own = pairs["jump-wave-dance"]
    first = result["frames"][0]
    seam, nxt = result["seams"][:2]
    held = slice(int(seam["frame"] - first) + seam["window"], int(nxt["frame"] - first) - 12)
    fps = result["fps"]

    def heights(h, frames):
        low = lowest(None, h, names)
        floor = float(np.percentile(low, 5))
        out = []
        for f, side in enumerate("LR"):
            toe, ankle = h[:, names.index(f"toe.{side}"), 2] - floor, h[:, names.index(f"foot.{side}"), 2] - floor
            out.append((np.median(toe[frames[f]]), np.median(ankle[frames[f]])))
        return out
    bye = own[1][1]
    balls = _balls(bye, names)
    speed = np.concatenate([[[0.0, 0.0]], np.linalg.norm(np.diff(balls[..., :2], axis=0), axis=-1)]) * fps
    low = lowest(None, bye, names)
    standing = [(low[:, f] <= np.percentile(low, 5) + PLANT_BAND) & (speed[:, f] < PLANT_SPEED) for f in range(2)]
    assert all(m.sum() > 30 for m in standing)
    clip = heights(bye, standing)
    out = heights(heads, [held, held])
    assert all(p["held"] for p in seam["plants"]) and len(seam["plants"]) == 2
    for f, ((toe, ankle), (own_toe, own_ankle)) in enumerate(zip(out, clip)):
        print(f"\n{FEET[f]} held after the landing: toe {toe * 1000:.1f} mm, ankle {ankle * 1000:.1f} mm above the "
              f"floor (bye alone: {own_toe * 1000:.1f}, {own_ankle * 1000:.1f} mm)")
        assert abs(toe - own_toe) <= 0.005 and abs(ankle - own_ankle) <= 0.005


@pytest.mark.slow
def test_planted_feet_do_not_slide_across_seams_and_foot_lock_matters(walk):
    result, (rot, heads, names) = walk["held"]
    assert result["foot_lock"] and len(result["seams"]) == 9
    first = result["frames"][0]
    slides = []
    for seam in result["seams"]:
        assert seam["plants"], f"seam {seam['index']}: a walk always has a foot on the floor"
        for p in seam["plants"]:
            lo, hi = (int(f - first) for f in p["frames"])
            assert lo <= seam["frame"] - first + seam["window"] and hi >= seam["frame"] - first - 1
            ankle = heads[lo:hi + 1, names.index(p["bone"])]
            slides.append(np.linalg.norm(ankle[:, :2] - ankle[:1, :2], axis=1).max())
            # a plant is a foot on the floor: low the whole run
            low = lowest(None, heads[lo:hi + 1], names)[:, FEET.index(p["bone"])]
            assert low.max() - low.min() < 0.05
    print(f"\n{len(slides)} held plants across 9 seams; largest slide {max(slides) * 100:.3f} cm")
    assert max(slides) <= 0.01, f"planted feet slide up to {max(slides) * 100:.2f} cm"
    # without the hold the same feet slide, and the hold changed the legs' keys
    free, (rot_f, heads_f, _n) = walk["free"]
    assert [s["window"] for s in free["seams"]] == [s["window"] for s in result["seams"]]
    slid = []
    for seam in result["seams"]:
        for p in seam["plants"]:
            lo, hi = (int(f - first) for f in p["frames"])
            ankle = heads_f[lo:hi + 1, names.index(p["bone"])]
            slid.append(np.linalg.norm(ankle[:, :2] - ankle[:1, :2], axis=1).max())
    print(f"without --foot-lock the same plants slide up to {max(slid) * 100:.2f} cm")
    assert max(slid) > 0.01
    legs = [names.index(b) for b in ("thigh.L", "shin.L", "thigh.R", "shin.R")]
    assert np.abs(rot[:, legs] - rot_f[:, legs]).max() > 1e-3
    arms = [names.index(b) for b in ("upper_arm.L", "hand.R", "head")]
    np.testing.assert_allclose(np.abs(np.sum(rot[:, arms] * rot_f[:, arms], -1)), 1.0, atol=1e-6)


@pytest.mark.slow
def test_walk_chain_stays_on_one_floor(walk):
    result, (rot, heads, names) = walk["held"]
    _s, (_r1, heads1, _n) = walk["single"]
    # plants found by the test itself: a foot within 3 cm of its lowest height and slower
    # than 0.2 m/s for 4 frames or more; the height of each plant is its median lowest point
    fps = result["fps"]
    first = result["frames"][0]
    bounds = [0] + [int(s["frame"] - first) for s in result["seams"]] + [len(heads)]

    def plants(h):
        low = lowest(None, h, names)
        out = []
        for k, foot in enumerate(FEET):
            v = np.r_[0.0, np.linalg.norm(np.diff(h[:, names.index(foot), :2], axis=0), axis=1) * fps]
            mask = (low[:, k] < np.percentile(low[:, k], 5) + 0.03) & (v < 0.2)
            out += [(a, np.median(low[a:b, k]), foot) for a, b in runs(mask) if b - a >= 4]
        return out

    chain, own = plants(heads), [z for _a, z, _f in plants(heads1)]
    assert len(chain) >= 40
    # no drift: the mean planted-foot height of every copy of the loop is the same within
    # 1 cm over the chain (the clip's own plants lie at different heights, ±1.5 cm, as
    # captured), and no plant leaves the clip's own range by more than 1 cm
    per_copy = [np.mean([z for a, z, _f in chain if lo <= a < hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    heights = [z for _a, z, _f in chain]
    print(f"\nper-copy planted-foot height spread {np.ptp(per_copy) * 100:.3f} cm over 10 copies; plants "
          f"{min(heights) * 100:.2f}…{max(heights) * 100:.2f} cm (the clip alone: {min(own) * 100:.2f}…"
          f"{max(own) * 100:.2f} cm)")
    assert np.ptp(per_copy) <= 0.01, f"the floor drifts by {np.ptp(per_copy) * 100:.1f} cm over the chain"
    assert min(own) - 0.01 <= min(heights) and max(heights) <= max(own) + 0.01
    # …and each plant of the walk cycle (the same foot, one copy period later: the plants
    # a + period ± 3 frames) stands at one height over the whole chain within 1 cm
    period = int(np.median(np.diff(bounds)))
    classes = []
    for a, z, foot in sorted(chain):
        home = next((c for c in classes if c[-1][2] == foot and abs(a - c[-1][0] - period) <= 3), None)
        (home.append if home is not None else lambda p: classes.append([p]))((a, z, foot))
    long = [c for c in classes if len(c) >= 8]
    spread = max(np.ptp([z for _a, z, _f in c]) for c in long)
    print(f"{len(long)} plants of the cycle found in 8 or more copies; each one's height varies by at "
          f"most {spread * 100:.3f} cm over the chain")
    assert len(long) >= 6 and spread <= 0.01


@pytest.mark.slow
def test_walk_chain_keeps_a_continuous_heading(walk):
    result, (rot, heads, names) = walk["held"]
    _s, (_r1, heads1, _n) = walk["single"]
    first = result["frames"][0]
    # heading from the hip line: across each seam it turns no more than the clip does in
    # one frame + 2°
    def hip_yaw(h):
        line = h[:, names.index("thigh.L")] - h[:, names.index("thigh.R")]
        return np.unwrap(np.arctan2(line[:, 1], line[:, 0]))
    own = np.degrees(np.abs(np.diff(hip_yaw(heads1)))).max()
    turn = np.degrees(np.abs(np.diff(hip_yaw(heads))))
    across = [turn[max(int(s["frame"] - first) - 2, 0):int(s["frame"] - first) + s["window"] + 2].max()
              for s in result["seams"]]
    print(f"hip line across the seams turns at most {max(across):.2f}°/frame; the clip's own largest: {own:.2f}°")
    assert max(across) <= own + 2.0


@pytest.mark.slow
def test_every_plant_of_the_walk_chain_stays_within_1_cm_of_the_clip_or_its_seam_says_so(walk):
    """test_seams.py's two plant checks on the walk chain (Blender's evaluated feet): every
    plant found after a seam slides at most 1 cm beyond what the clip does over those
    frames, and one that slides more is on a seam flagged 'plant' naming a foot neither
    held nor stepped."""
    result, (_rot, heads, names) = walk["held"]
    own = [walk["single"][1]] * 10
    worst = []
    for slide, clips, foot, seam in plant_run_slides(result, heads, names, own):
        worst.append((slide - clips, f"walk seam {seam['index']} {foot}"))
        if slide - clips > 0.01:
            assert seam["flagged"] and "plant" in seam["failures"], f"walk seam {seam['index']}: {foot} " \
                f"slides {slide * 100:.2f} cm (the clips {clips * 100:.2f} cm) unflagged"
            assert any(p["bone"] == foot and p["slides"] and not (p["held"] or p["step"]) for p in seam["plants"])
    print(f"\n{len(worst)} plants of the walk chain; largest slide beyond the clip {max(worst)[0] * 100:.2f} cm "
          f"({max(worst)[1]})")
    assert max(worst)[0] <= 0.01, max(worst)
