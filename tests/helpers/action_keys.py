"""Test helper: every keyframe of an action, to compare actions key for key."""
import numpy as np
from bpy_extras import anim_utils


def all_keys(action, path_contains=""):
    """{(data_path, index): keyframe co (2K,)} of the action's F-curves (every slot) whose
    data path contains `path_contains`."""
    out = {}
    for slot in action.slots:
        bag = anim_utils.action_get_channelbag_for_slot(action, slot)
        for fc in bag.fcurves if bag else ():
            if path_contains in fc.data_path:
                co = np.empty(2 * len(fc.keyframe_points))
                fc.keyframe_points.foreach_get("co", co)
                out[(fc.data_path, fc.array_index)] = co
    return out
