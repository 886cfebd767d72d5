"""The character as the capabilities read it: what bake, resolve, soft face and retarget
share, below all of them (it imports only compat, errors, keys, files and solver/).

Entry points:
    rig.read_rig, rig.RigModel   the armature as a solver.core.model.SkeletonModel plus its body
                                 and the skin read once (RigModel.skeleton, .skin, .skinned)
    rig.skeleton_of              the armature's bones as a solver.retarget.bonemap.Skeleton
    geometry.skinned_meshes, geometry.skin_weights, geometry.body_meshes   the skin as arrays
    fields.body_fields, fields.neck_fields, fields.grid_cache_dir   the body volumes as distance
                                 fields, their grids cached in the extension's user folder
    skin.SkinTest, skin.skin_penetration, skin.skin_depths   penetration measured on the
                                 evaluated skin (deepest per frame, per pair, per contact kind)

This file imports nothing: import the modules themselves.
"""
