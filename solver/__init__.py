"""SignSim's numerics: numpy and scipy only, arrays in and arrays out.

Nothing in this package may import bpy, mathutils or bmesh (tests/solver_tests/test_layers.py
enforces it), so the whole physics pass can be tested and benchmarked without Blender.
"""
