"""The character as the capabilities read it: what bake, resolve, soft face and retarget
share, below all of them (it imports only compat, errors, keys, files and solver/).

Entry points:
    rig.read_rig, rig.RigModel   the armature as a solver.core.model.SkeletonModel plus its body
    rig.skeleton_of              the armature's bones as a solver.retarget.bonemap.Skeleton
    geometry.skinned_meshes, geometry.skin_weights, geometry.body_meshes   the skin as arrays
    skin.SkinTest, skin.skin_penetration   penetration measured on the evaluated skin

This file imports nothing: import the modules themselves.
"""
