"""Motion-capture files and their checks, on arrays (no Blender).

Entry points:
    bvh_file.read, bvh_file.detect_orientation   BVH files
    gltf_file.read_document      glTF/GLB animation
    clip_checks.find_spikes, clip_checks.calibration_frames   cleaning helpers

This file imports nothing: import the modules themselves.
"""
