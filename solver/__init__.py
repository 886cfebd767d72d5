"""SignSim's numerics: numpy and scipy only, arrays in and arrays out.

Nothing in this package may import bpy, mathutils or bmesh (tests/solver/test_layers.py
enforces it), so the whole physics pass can be tested and benchmarked without Blender.

Entry points:
    model.SkeletonModel       the skeleton, built from arrays
    reference.Reference       the keyed animation to track (plus an optional face mesh)
    simulate.SimSettings      gains, contacts, schedule, substeps (presets: SimSettings.preset)
    simulate.simulate         the physics pass -> simulate.SimResult
    metrics.compare           before/after quality metrics as a JSON-able dict
    sdf.build_distance_grid   the face distance field (reusable across bakes)
"""
