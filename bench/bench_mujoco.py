"""The benchmark rig of bench_solver.py in MuJoCo, for a per-step cost comparison (not a test).

mjcf() writes an MJCF model from a SkeletonModel's arrays: the kinematic base as a mocap
body, one body per bone at its rest offset and rest rotation (w-first quaternions, as
MuJoCo's), ball joints or hinges about the bone's local X, one capsule geom per bone
from the head along +Y, the capsule masses and inertias as explicit inertials, PD
tracking as joint stiffness towards the reference (qpos_spring, updated every step) and
joint damping with SignSim's gains at the rest pose (Kp = M_dd ω², Kd = 2 ζ ω M_dd,
averaged over a ball joint's three DOFs), explicit contact pairs for exactly the
model's capsule pairs plus every face-sampled finger capsule against the face mesh,
and the implicitfast integrator at 1/120 s. MuJoCo: https://mujoco.readthedocs.io
(XML reference, Python bindings).
"""

import time

import mujoco
import numpy as np

from solver.core import quat
from solver.physics import dynamics
from solver.core.kinematics import forward_kinematics
from solver.physics.simulate import SimSettings, dof_gains

STEP = 1.0 / 120.0


def _fmt(values):
    return " ".join(f"{v:.9g}" for v in np.ravel(values))


def mjcf(model, face_bone, face_vertices, face_triangles, base_position, base_rotation):
    """MJCF text of the rig (see the module docstring); base pose (3,) m, (4,) w-first."""
    kin = forward_kinematics(model, np.tile(quat.IDENTITY, (model.n_bones, 1)), quat.to_matrix(base_rotation),
                             base_position)
    com, inertia = dynamics.body_inertia_world(model, kin)
    M = dynamics.mass_matrix(model, kin, dynamics.composite_inertias(model, dynamics.spatial_inertias(model, com,
                                                                                                       inertia)))
    omega, zeta = dof_gains(model, SimSettings())
    diag = M.diagonal()
    kp, kd = diag * omega ** 2, 2.0 * zeta * omega * diag
    children = {i: [] for i in range(-1, model.n_bones)}
    for i, p in enumerate(model.parents):
        children[int(p)].append(i)
    thin = model.capsule_radius <= 0.01  # the finger capsules SignSim samples against the face field
    face_pairs = [i for i in range(model.n_bones) if model.collide[i] and thin[i]
                  and model.ancestors[i, face_bone] == 0 and model.ancestors[face_bone, i] == 0]

    def body(i, depth):
        pad = "  " * depth
        s, c = model.dof_start[i], model.dof_count[i]
        joint = "ball" if c == 3 else "hinge"
        axis = "" if c == 3 else ' axis="1 0 0"'
        length, r = model.capsule_length[i], model.capsule_radius[i]
        lines = [f'{pad}<body name="b{i}" pos="{_fmt(model.rest_offsets[i])}" quat="{_fmt(model.rest_rotations[i])}">',
                 f'{pad}  <inertial pos="{_fmt(model.com_local[i])}" mass="{model.mass[i]:.9g}" '
                 f'diaginertia="{_fmt(np.diag(model.inertia_local[i]))}"/>',
                 f'{pad}  <joint name="j{i}" type="{joint}"{axis} stiffness="{kp[s:s + c].mean():.9g}" '
                 f'damping="{kd[s:s + c].mean():.9g}"/>',
                 f'{pad}  <geom name="g{i}" type="capsule" fromto="0 0 0 0 {length:.9g} 0" size="{r:.9g}"/>']
        if i == face_bone:
            lines.append(f'{pad}  <geom name="face" type="mesh" mesh="face"/>')
        for k in children[i]:
            lines += body(k, depth + 1)
        return lines + [f"{pad}</body>"]

    bodies = []
    for k in children[-1]:
        bodies += body(k, 3)
    pairs = [f'    <pair geom1="g{i}" geom2="g{j}"/>' for i, j in model.pairs]
    pairs += [f'    <pair geom1="g{i}" geom2="face"/>' for i in face_pairs]
    return "\n".join([
        '<mujoco model="signsim-bench-rig">',
        f'  <option timestep="{STEP:.12g}" integrator="implicitfast" gravity="0 0 -{dynamics.GRAVITY}"/>',
        '  <default><geom contype="0" conaffinity="0"/></default>',
        f'  <asset><mesh name="face" vertex="{_fmt(face_vertices)}" face="{_fmt(face_triangles)}"/></asset>',
        '  <worldbody>',
        f'    <body name="base" mocap="true" pos="{_fmt(base_position)}" quat="{_fmt(base_rotation)}">',
        *bodies,
        '    </body>',
        '  </worldbody>',
        '  <contact>', *pairs, '  </contact>',
        '</mujoco>'])


def _targets(model, mj, times, rotations, step_times):
    """qpos_spring (T, nq) of the reference at step_times: ball joints the keyed
    quaternion (slerped between frames), hinges its twist angle about X."""
    k = np.clip(np.searchsorted(times, step_times, side="right") - 1, 0, len(times) - 2)
    w = (step_times - times[k]) / (times[k + 1] - times[k])
    q = quat.slerp(rotations[k], rotations[k + 1], np.broadcast_to(w[:, None], (len(k), model.n_bones)))
    out = np.empty((len(step_times), mj.nq))
    for i in range(model.n_bones):
        adr = mj.jnt_qposadr[mj.joint(f"j{i}").id]
        if model.dof_count[i] == 3:
            out[:, adr:adr + 4] = q[:, i]
        else:
            out[:, adr] = 2.0 * np.arctan2(q[:, i, 1], q[:, i, 0])
    return out


def run(model, index, face_triangles, face_vertices, times, rotations, base_positions, base_rotations,
        contacts=True):
    """Step the MuJoCo rig over the reference; returns {'steps', 'per_step' (CPU s per
    mj_step, without the loop's target updates), 'contacts_mean'}."""
    mj = mujoco.MjModel.from_xml_string(mjcf(model, index["head"], face_vertices, face_triangles,
                                              base_positions[0], base_rotations[0]))
    if not contacts:
        mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    data = mujoco.MjData(mj)
    step_times = np.arange(int(round((times[-1] - times[0]) / STEP))) * STEP + times[0]
    target = _targets(model, mj, times, rotations, step_times)
    k = np.clip(np.searchsorted(times, step_times, side="right") - 1, 0, len(times) - 2)
    w = ((step_times - times[k]) / (times[k + 1] - times[k]))[:, None]
    base_p = (1 - w) * base_positions[k] + w * base_positions[k + 1]
    base_q = quat.slerp(base_rotations[k], base_rotations[k + 1], w[:, 0])
    data.qpos[:] = target[0]
    mujoco.mj_forward(mj, data)
    spring = mj.qpos_spring
    n_contacts = 0
    cpu = time.process_time()
    for s in range(len(step_times)):
        data.mocap_pos[0] = base_p[s]
        data.mocap_quat[0] = base_q[s]
        spring[:] = target[s]
        mujoco.mj_step(mj, data)
        n_contacts += data.ncon
    loop = time.process_time() - cpu
    cpu = time.process_time()  # the same loop without mj_step: the Python overhead to subtract
    for s in range(len(step_times)):
        data.mocap_pos[0] = base_p[s]
        data.mocap_quat[0] = base_q[s]
        spring[:] = target[s]
        n_contacts += 0
    overhead = time.process_time() - cpu
    steps = len(step_times)
    return {"steps": steps, "per_step": (loop - overhead) / steps, "contacts_mean": n_contacts / steps}
