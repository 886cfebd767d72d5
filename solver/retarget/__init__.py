"""Retargeting on arrays: a source clip's motion onto another skeleton.

Entry points:
    bonemap.analyse, bonemap.BoneMap   which target bone follows which source bone
    transfer_math.solve          local rotation and hips keys of the target
    contact_transfer.detect, contact_transfer.enforce  contacts of the source kept on the target

This file imports nothing: import the modules themselves.
"""
