"""The nearest pose without penetration: move the joints the least so that no body part is
inside another.

Entry points:
    nearest_pose.resolve_pose, nearest_pose.resolve_sequence, nearest_pose.ResolveSettings
    nearest_pose.warm_up         compile the kernels before the first pose
Internals: selfdist (separations between body parts, compiled).

This file imports nothing: import the modules themselves.
"""
