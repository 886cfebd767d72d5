"""The physics pass: a skeleton tracks its reference under contacts, joint limits and gravity.

Entry points:
    simulate.simulate, simulate.SimSettings   the pass -> simulate.SimResult
    reference.Reference          the keyed animation to track (plus an optional face mesh)
    metrics.compare              before/after quality metrics as a JSON-able dict
    contact_depths.contact_depths  penetration per frame and contact kind
    guard.guard                  fall back to the reference where the pass diverges
    held_overlap.held_overlaps   overlaps the reference holds on purpose
    joint_limits.fit_to_reference  joint limits and hinges that can follow the reference
    warm_up.warm_up              compile (or load) every kernel before a bake
Internals: integrator (implicit steps), dynamics (rigid-body terms), capsule_contacts.

This file imports nothing: import the modules themselves.
"""
