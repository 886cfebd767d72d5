"""The base every capability builds on: arrays in, arrays out, no Blender.

Entry points:
    model.SkeletonModel          the skeleton, built from arrays
    quat                         quaternion algebra (w-first), batched
    kinematics.forward_kinematics  world frames of a SkeletonModel (compiled kernel)
    kinematics.pose_matrices     armature-space matrices from keyed channels (Blender's pose model)
    kernels.configure_cache      where the compiled kernels are cached (kernels: every numba kernel)
    sdf.build_distance_grid      a mesh's signed distance field (sdf.DistanceGrid)
    body_volumes.build_field     face, torso and palm volumes from a skin, with their samples
    capsule_pairs.rest_filtered_pairs  the capsule pairs that may collide
    capsule_radii.radius_from_points   a bone's capsule radius from its skin
    nearest_pose.resolve_pose, nearest_pose.resolve_sequence  the nearest pose without penetration
                                 (selfdist: the signed distances between body parts, compiled)
    settings                     the physics settings table: groups, defaults, presets
    skeleton.analyse             a skeleton's body (hips, chains, sides, fingers) from its names and shape
    posing                       pose edits shared by retarget and compose (plants, two-bone IK)
    keyreduce.keep_mask          the keys a curve needs within a tolerance

This file imports nothing: import the modules themselves.
"""
