"""Benchmark of the physics pass on a reference signing rig, next to MuJoCo (not a test).

Run from the repository root:  python bench/bench_solver.py [seconds] [--short 15] [--long 240]

Rig: kinematic chest base; neck, head (with a face mesh for the hand–face distance
field); per side clavicle, upper arm, forearm, hand and 15 finger bones (3 per finger,
thumb included; middle/distal finger joints are hinges). Motion: synthetic
fingerspelling of the right hand in front of the chest (a handshape table of finger
curl and spread, 4 letters per second) that touches the chin every 3 s, a swaying left
arm, head and chest, keyed at 60 fps and simulated with step doubling at 2 steps per
frame, i.e. 120 Hz internal steps (more where anti-tunnelling subdivides).

The same rig is built in MuJoCo from the model arrays (bench_mujoco.py's MJCF: bodies,
ball/hinge joints, capsule geoms, masses and inertias, PD as joint stiffness towards the
reference and damping, contacts between the same capsule pairs and the fingers against
the face mesh, implicitfast at 1/120 s) and stepped over the same motion in the same run.
Prints CPU time (time.process_time) per internal step of both and their ratio, the
real-time factor, the cost per step at a short and a long motion and the peak memory of a
fresh process simulating the long one. CPU time, because wall time on a machine shared by
other jobs measures the others too; the first run in a fresh environment also compiles
the solver (reported separately, not in the figures).
"""

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import results

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core, as the target is stated
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver.core import quat  # noqa: E402
from solver.core.model import SkeletonModel  # noqa: E402
from solver.physics.reference import Reference  # noqa: E402
from solver.core.sdf import build_distance_grid, icosphere  # noqa: E402
from solver.physics.simulate import SimSettings, simulate  # noqa: E402

CHEST = np.array([0.0, 0.0, 1.30])


def _frame(head, tail, x_hint):
    y = (tail - head) / np.linalg.norm(tail - head)
    x = x_hint - np.dot(x_hint, y) * y
    x /= np.linalg.norm(x)
    return np.stack([x, y, np.cross(x, y)], axis=1)


def build_rig():
    """SkeletonModel of the signing rig, plus bone indices and the face mesh (head frame)."""
    bones = []  # (name, parent name, head, tail, x_hint, radius, type, group)

    def add(name, parent, head, tail, x_hint, radius, kind="ball", group="arm"):
        bones.append((name, parent, np.array(head, float), np.array(tail, float),
                      np.array(x_hint, float), radius, kind, group))

    add("neck", None, (0, 0, 1.45), (0, 0, 1.55), (1, 0, 0), 0.05, group="neck")
    add("head", "neck", (0, 0, 1.55), (0, 0, 1.75), (1, 0, 0), 0.09, group="head")
    for side, s in (("L", 1.0), ("R", -1.0)):
        add(f"clavicle.{side}", None, (0.02 * s, 0, 1.42), (0.17 * s, 0, 1.42), (0, 0, 1), 0.03, group="clavicle")
        add(f"upper_arm.{side}", f"clavicle.{side}", (0.18 * s, 0, 1.42), (0.18 * s, 0, 1.13), (1, 0, 0), 0.045)
        add(f"forearm.{side}", f"upper_arm.{side}", (0.18 * s, 0, 1.13), (0.18 * s, 0, 0.87), (1, 0, 0), 0.035)
        add(f"hand.{side}", f"forearm.{side}", (0.18 * s, 0, 0.87), (0.18 * s, 0, 0.78), (0, s, 0), 0.022,
            group="hand")
        lengths = {"thumb": (0.04, 0.032, 0.028), "index": (0.045, 0.027, 0.022), "middle": (0.05, 0.03, 0.023),
                   "ring": (0.046, 0.028, 0.022), "pinky": (0.036, 0.022, 0.02)}
        y0 = {"index": -0.03, "middle": -0.01, "ring": 0.01, "pinky": 0.03}
        for finger, (l1, l2, l3) in lengths.items():
            if finger == "thumb":
                head = np.array([0.18 * s, -0.03, 0.85])
                direction = np.array([-0.25 * s, -0.55, -0.8])
            else:
                head = np.array([0.18 * s, y0[finger], 0.775])
                direction = np.array([0.0, 0.0, -1.0])
            direction /= np.linalg.norm(direction)
            parent, radius = f"hand.{side}", 0.0095
            for k, length in enumerate((l1, l2, l3)):
                tail = head + length * direction
                add(f"{finger}.{k + 1:02d}.{side}", parent, head, tail, (0, s, 0), radius,
                    "ball" if k == 0 else "hinge", "finger")
                parent, head, radius = f"{finger}.{k + 1:02d}.{side}", tail + 0.0, radius - 0.001
    index = {b[0]: i for i, b in enumerate(bones)}
    parents, offsets, rest_rot, frames = [], [], [], []
    for name, parent, head, tail, x_hint, radius, kind, group in bones:
        R = _frame(head, tail, x_hint)
        if parent is None:
            Rp, hp = np.eye(3), CHEST
        else:
            Rp, hp = frames[index[parent]], bones[index[parent]][2]
        frames.append(R)
        parents.append(-1 if parent is None else index[parent])
        offsets.append(Rp.T @ (head - hp))
        rest_rot.append(quat.from_matrix(Rp.T @ R))
    lower = np.full((len(bones), 3), -np.inf)
    upper = np.full((len(bones), 3), np.inf)
    for i, b in enumerate(bones):
        if b[7] == "finger":
            lower[i], upper[i] = (-0.35, -0.3, -0.45), (1.75, 0.3, 0.45)
    collide = np.array([b[0] not in ("head", "neck") and not b[0].startswith("clavicle") for b in bones])
    model = SkeletonModel(
        parents=parents, rest_offsets=offsets, rest_rotations=rest_rot, joint_types=[b[6] for b in bones],
        capsule_radius=[b[5] for b in bones], capsule_length=[np.linalg.norm(b[3] - b[2]) for b in bones],
        groups=[b[7] for b in bones], limit_lower=lower, limit_upper=upper, collide=collide,
        names=[b[0] for b in bones])
    # Face: an ellipsoid in front of the skull, in the head bone's frame (Y up the head, Z to the front).
    v, f = icosphere(3)
    face = v * np.array([0.065, 0.09, 0.05]) + np.array([0.0, 0.07, 0.03])
    return model, index, face, f


# Handshapes: curl (proximal, middle, distal) per finger in rad, and finger spread in rad.
LETTERS = {
    "A": (1.5, 1.5, 0.3, 0.0), "B": (0.0, 0.0, 1.2, 0.0), "C": (0.7, 0.6, 0.6, 0.1), "D": (1.2, 1.2, 0.0, 0.0),
    "E": (1.4, 1.5, 1.2, 0.0), "F": (0.1, 0.1, 1.0, 0.2), "L": (1.5, 1.5, 0.0, 0.2), "O": (0.9, 0.9, 0.8, 0.0),
    "S": (1.6, 1.6, 0.9, 0.0), "V": (1.3, 1.3, 0.0, 0.35), "Y": (1.5, 1.5, 0.0, 0.3), "W": (0.3, 0.2, 0.3, 0.3)}


# Rotation vectors (rad) of the right upper arm, forearm and hand that put the extended
# index fingertip's capsule 5 mm into the chin (found once by minimising the exact mesh
# distance over these angles with the head and chest at rest).
TOUCH_CHIN = np.array([[-0.9052, -0.0887, 1.0868], [-2.6017, 0.0, 0.0], [-0.0144, 0.0, 0.029]])


def fingerspelling(model, index, seconds, fps=60.0, rate=4.0, seed=7):
    """Reference of the right hand spelling random letters at `rate` letters/s (seeded)."""
    rng = np.random.default_rng(seed)
    n = int(round(seconds * fps)) + 1
    t = np.arange(n) / fps
    letters = rng.choice(sorted(LETTERS), size=int(seconds * rate) + 2)
    # Hold each letter for 40 % of its slot, then blend with smoothstep (C¹ keys).
    slot = 1.0 / rate
    k = np.minimum((t / slot).astype(int), len(letters) - 2)
    s = np.clip((t / slot - k - 0.4) / 0.6, 0.0, 1.0)
    w = 3 * s ** 2 - 2 * s ** 3
    shape_a = np.array([LETTERS[c] for c in letters[k]])
    shape_b = np.array([LETTERS[c] for c in letters[k + 1]])
    shape = (1 - w)[:, None] * shape_a + w[:, None] * shape_b
    rv = np.zeros((n, model.n_bones, 3))
    fingers = ("index", "middle", "ring", "pinky")
    for side in ("R", "L"):
        amp = 1.0 if side == "R" else 0.35
        for j, finger in enumerate(fingers):
            spread = (j - 1.5) / 1.5 * shape[:, 3] * amp
            rv[:, index[f"{finger}.01.{side}"], 0] = amp * shape[:, 0] * (1.0 + 0.05 * j)
            rv[:, index[f"{finger}.01.{side}"], 2] = spread * (1.0 if side == "R" else -1.0)
            rv[:, index[f"{finger}.02.{side}"], 0] = amp * shape[:, 1]
            rv[:, index[f"{finger}.03.{side}"], 0] = amp * shape[:, 2]
        rv[:, index[f"thumb.01.{side}"], 0] = 0.5 * amp * shape[:, 0]
        rv[:, index[f"thumb.02.{side}"], 0] = 0.6 * amp * shape[:, 1]
        rv[:, index[f"thumb.03.{side}"], 0] = 0.5 * amp * shape[:, 2]
    # Right arm: raised forward, elbow bent, hand drifting in front of the chest; every
    # 3 s it blends into TOUCH_CHIN with the index finger pointing, which drives the
    # fingertip 5 mm into the face.
    reach = np.clip(np.sin(2 * np.pi * t / 3.0) * 3 - 2.0, 0.0, 1.0)
    sign = np.zeros((n, 3, 3))
    sign[:, 0] = np.stack([-0.9 + 0.05 * np.sin(2 * np.pi * 0.7 * t), 0 * t, -0.35 + 0 * t], -1)
    sign[:, 1, 0] = -1.6 + 0.1 * np.sin(2 * np.pi * 0.5 * t)
    sign[:, 2, 2] = 0.2 * np.sin(2 * np.pi * 0.9 * t)
    arm = [index[f"{b}.R"] for b in ("upper_arm", "forearm", "hand")]
    rv[:, arm] = (1 - reach)[:, None, None] * sign + reach[:, None, None] * TOUCH_CHIN
    for k in range(1, 4):
        rv[:, index[f"index.0{k}.R"]] *= (1 - reach)[:, None]
    # Left arm: forward at waist height with a slow swing; neck, head and chest sway.
    rv[:, index["upper_arm.L"], 0] = -0.5 + 0.1 * np.sin(2 * np.pi * 0.4 * t)
    rv[:, index["forearm.L"], 0] = -1.2 + 0.15 * np.sin(2 * np.pi * 1.1 * t)
    rv[:, index["neck"], 0] = 0.1 * np.sin(2 * np.pi * 0.3 * t)
    rv[:, index["head"], 2] = 0.1 * np.sin(2 * np.pi * 0.2 * t)
    rot = quat.exp(rv)
    base_p = np.tile(CHEST, (n, 1)) + np.stack([0.01 * np.sin(2 * np.pi * 0.25 * t), 0 * t, 0 * t], -1)
    base_r = quat.exp(np.stack([0 * t, 0 * t, 0.05 * np.sin(2 * np.pi * 0.2 * t)], -1))
    return t, rot, base_p, base_r


def signsim_run(model, index, face_v, face_f, grid, seconds):
    """(CPU seconds, internal steps, SimResult) of the physics pass over `seconds` of motion."""
    t, rot, base_p, base_r = fingerspelling(model, index, seconds)
    ref = Reference(t, rot, base_p, base_r, face_vertices=face_v, face_triangles=face_f, face_bone=index["head"])
    cpu = time.process_time()
    res = simulate(model, ref, SimSettings(), face_grid=grid)
    return time.process_time() - cpu, int(res.substeps.sum()), res


def main(seconds=60.0, short=15.0, long=240.0):
    from solver.physics.warm_up import warm_up
    compile_s, compiled = warm_up()
    print(f"solver kernels {'compiled' if compiled else 'loaded from the cache'} in {compile_s:.2f} s CPU")
    model, index, face_v, face_f = build_rig()
    print(f"rig: {model.n_bones} bones + base, {model.n_dof} DOF, {int(model.collide.sum())} colliding capsules, "
          f"{len(model.pairs)} capsule pairs, face mesh {len(face_f)} triangles")
    cpu = time.process_time()
    grid = build_distance_grid(face_v, face_f, index["head"])
    print(f"face distance grid {grid.values.shape}: built in {time.process_time() - cpu:.2f} s CPU")
    print("all times are CPU seconds of this process (time.process_time); wall time is not "
          "meaningful on a shared machine")

    cpu, steps, res = signsim_run(model, index, face_v, face_f, grid, seconds)
    per_step = cpu / steps
    print(f"SignSim, {seconds:.0f} s of motion: {steps} internal steps ({steps / seconds:.0f} Hz mean), "
          f"{cpu:.2f} s: {1e6 * per_step:.1f} µs per step, real-time factor {seconds / cpu:.1f}x")
    print(f"  substeps per frame: mean {res.substeps[1:].mean():.2f}, max {res.substeps.max()}; "
          f"fallbacks per level {res.fallback_counts.tolist()}")
    print(f"  penetration: max {res.penetration_mm.max():.3f} mm, p95 {np.percentile(res.penetration_mm, 95):.3f} mm")

    try:
        import bench_mujoco
    except ImportError as ex:  # MuJoCo is a development dependency (requirements-dev.txt)
        print(f"MuJoCo comparison skipped: {ex}")
    else:
        t, rot, base_p, base_r = fingerspelling(model, index, seconds)
        for contacts in (True, False):
            mj = bench_mujoco.run(model, index, face_f, face_v, t, rot, base_p, base_r, contacts=contacts)
            label = "MuJoCo " + mujoco_version() + (" mj_step" if contacts else " mj_step, contacts off")
            print(f"{label}: {mj['steps']} steps at 1/120 s, {1e6 * mj['per_step']:.1f} µs per step, "
                  f"real-time factor {seconds / (mj['per_step'] * mj['steps']):.0f}x"
                  + (f"; contacts per step mean {mj['contacts_mean']:.1f}" if contacts else ""))
            if contacts:
                print(f"SignSim/MuJoCo per-step CPU ratio: {per_step / mj['per_step']:.2f} (target <= 2)")
                results.check("SignSim per step at most 2x MuJoCo's mj_step", per_step / mj["per_step"] <= 2)

    costs = {}
    for duration in (short, long):
        cpu, steps, _ = signsim_run(model, index, face_v, face_f, grid, duration)
        costs[duration] = cpu / steps
        print(f"SignSim, {duration:.0f} s of motion: {1e6 * cpu / steps:.1f} µs per step, "
              f"real-time factor {duration / cpu:.1f}x")
    print(f"cost per step {long:.0f} s / {short:.0f} s: {costs[long] / costs[short]:.2f} (flat = 1)")
    # In a fresh process, so that MuJoCo and the runs above do not count.
    proc = subprocess.run([sys.executable, __file__, "--peak-memory", str(long)], capture_output=True, text=True)
    print(proc.stdout.strip())
    results.check(f"peak memory of {long:.0f} s of motion <= 300 MB", proc.returncode == 0)
    return res


def peak_memory(seconds):
    """Print the peak resident memory of a fresh process that simulates `seconds` of motion."""
    from solver.physics.warm_up import warm_up
    warm_up()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    model, index, face_v, face_f = build_rig()
    grid = build_distance_grid(face_v, face_f, index["head"])
    signsim_run(model, index, face_v, face_f, grid, seconds)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory, SignSim alone, {seconds:.0f} s of motion: {peak:.0f} MB (target <= 300 MB; "
          f"{base:.0f} MB of it before the run: Python, numpy, scipy, numba and the loaded kernels)")
    return 0 if peak <= 300 else 1


def mujoco_version():
    import mujoco
    return mujoco.__version__


def cli():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seconds", nargs="?", type=float, default=60.0, help="motion for the comparison (s)")
    parser.add_argument("--short", type=float, default=15.0, help="short motion for the cost-per-step check (s)")
    parser.add_argument("--long", type=float, default=240.0, help="long motion for the cost-per-step check (s)")
    parser.add_argument("--peak-memory", type=float, metavar="SECONDS",
                        help="only print the peak memory of simulating SECONDS of motion (used by the full run)")
    args = parser.parse_args()
    if args.peak_memory is not None:
        return peak_memory(args.peak_memory)
    main(args.seconds, args.short, args.long)


if __name__ == "__main__":
    if "--peak-memory" in sys.argv:
        sys.exit(cli())
    results.run(cli)
