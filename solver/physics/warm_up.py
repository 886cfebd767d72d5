"""Compiling the solver's kernels ahead of a bake or a resolve: one call that runs every
compiled kernel once on a tiny model (kept out of core/kernels.py so that the compiled layer
imports none of the modules built on it)."""

import time

import numpy as np

from ..core import kernels, kinematics, model, nearest_pose, quat, sdf
from . import capsule_contacts, dynamics, integrator


_first = None  # the first call's (CPU seconds, compiled)


def warm_up(tick=None):
    """Compile (or load from the cache) every kernel through the public functions, on a
    three-bone model, so that the signatures are the ones a bake uses; returns
    (CPU seconds, True when this call compiled anything rather than loading it). Once per
    process: a later call returns the first call's result (the kernels stay loaded).
    tick: None or tick(fraction) called after each group of kernels (fraction of them
    done, 0–1), for progress while the first call after an install compiles."""
    global _first
    if _first is None:
        start, misses = time.process_time(), kernels._misses()
        steps = _steps()
        for i, step in enumerate(steps):
            step()
            if tick is not None:
                tick((i + 1) / len(steps))
        _first = time.process_time() - start, kernels._misses() > misses
    return _first


def _steps():
    """warm_up's groups of kernels, in order: callables running each once on a tiny model."""
    rig = model.SkeletonModel(parents=[-1, -1, 1], rest_offsets=[[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.1, 0.0]],
                              rest_rotations=np.tile([1.0, 0.0, 0.0, 0.0], (3, 1)), joint_types=["ball", "ball", "hinge"],
                              capsule_radius=[0.01] * 3, capsule_length=[0.1] * 3, groups=["a"] * 3)
    q, qd, zero6 = np.tile([1.0, 0.0, 0.0, 0.0], (3, 1)), np.zeros(rig.n_dof), np.zeros(6)
    s = {}

    def rigid():
        s["kin"], _, s["spatial"], *_ = dynamics.rigid_body_terms(rig, q, np.eye(3), np.zeros(3), qd, zero6, zero6)

    def inverse_dynamics():
        batch = kinematics.forward_kinematics(rig, np.stack([q, q]), np.eye(3), np.zeros(3))
        dynamics.rnea(rig, batch, dynamics.spatial_inertias(rig, *dynamics.body_inertia_world(rig, batch)),
                      np.zeros((2, rig.n_dof)), None, zero6, zero6)

    def mass():
        composite = dynamics.composite_inertias(rig, s["spatial"])
        dynamics.mass_matrix(rig, s["kin"], composite)
        dynamics.gravity_stiffness(rig, s["kin"], composite)

    def contacts():
        kinematics.normal_jacobian(rig, s["kin"], np.array([2]), np.zeros((1, 3)), np.ones((1, 3)), np.array([0]))
        seg = kinematics.capsule_segments(rig, s["kin"])
        capsule_contacts.capsule_tunnelling(rig, seg, seg, capsule_contacts.capsule_contacts(rig, seg))

    def fields():
        sdf.DistanceGrid(np.zeros(3), 1.0, np.zeros((2, 2, 2)), 0, 0.1).sample(np.zeros((1, 3)))
        quat.log(quat.mul(q, quat.conj_mul(q, quat.exp(np.zeros((3, 3))))))
        vertices, triangles = sdf.icosphere(0)
        s["grid"] = sdf.build_distance_grid(vertices, triangles, 0, spacing=0.5, margin=0.2)
        sdf.winding_number(vertices, triangles, np.zeros((1, 3)))

    def step():
        physics = integrator.Physics(np.ones(rig.n_dof), np.ones(rig.n_dof), 1.0, 1.0, 9.81,
                                     (integrator.face_samples(rig, s["grid"]),))
        target = integrator.Target(q, qd, np.eye(3), np.zeros(3), zero6, zero6)
        ev = integrator.evaluate(rig, physics, integrator.make_state(rig, q, qd), target)
        integrator.implicit_step(rig, physics, ev, None, target, target, 0.01, 1e4, 1.0)
        integrator.face_tunnelling(physics, ev, ev)

    return (rigid, inverse_dynamics, mass, contacts, fields, step,
            nearest_pose.warm_up)  # the last: the projection's distance kernels
