"""SignSim's numerics: numpy, scipy and numba (compiled kernels) only, arrays in and arrays out.

Nothing in this package may import bpy, mathutils or bmesh (tests/solver/test_layers.py
enforces it), so the whole physics pass can be tested and benchmarked without Blender.

Entry points:
    model.SkeletonModel       the skeleton, built from arrays
    reference.Reference       the keyed animation to track (plus an optional face mesh)
    simulate.SimSettings      gains, contacts, schedule, substeps (presets: SimSettings.preset)
    simulate.simulate         the physics pass -> simulate.SimResult
    metrics.compare           before/after quality metrics as a JSON-able dict
    sdf.build_distance_grid   a body part's distance field (reusable across bakes)
    body.build_field          face, torso and palm volumes from a skin, with their samples
    limits.fit_to_reference   joint limits and hinges that can follow the reference
"""
