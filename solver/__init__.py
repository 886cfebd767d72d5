"""SignSim's numerics: numpy, scipy and numba (compiled kernels) only, arrays in and arrays out.

Nothing in this package may import bpy, mathutils or bmesh (tests/solver/test_layers.py
enforces it), so the whole physics pass can be tested and benchmarked without Blender.

Subpackages (each __init__.py names its entry points and imports nothing):
    core/       quaternions, kinematics, the skeleton model, distance fields, settings, body volumes
    physics/    the physics pass: simulate, reference, metrics, guard, joint limits
    retarget/   bone maps, transfer math, contact transfer
    compose/    splicing clips
    resolve/    the nearest pose without penetration
    softface/   the soft face
    mocap/      BVH and glTF files, clip checks
A subpackage imports only core/ and itself (tests/solver/test_layers.py).
"""
