"""The one place for Blender's layered-action API (actions, slots, channelbags), its
workarounds and every difference between the Blender versions SignSim runs on (4.5 LTS
and 5.0); code elsewhere never touches `action_slot` or channelbags directly.

Blender 4.5 lacks bpy_extras.anim_utils.action_ensure_channelbag_for_slot and
animdata_get_channelbag_for_assigned_slot, and its ActionChannelbagFCurves.new() takes no
group_name; the functions below give both versions the 5.0 behaviour.

Source: Blender Python API, bpy.types.AnimData (action, action_slot, action_slot_handle),
bpy.types.ActionKeyframeStrip.channelbag, bpy.types.ActionChannelbagFCurves.new,
bpy.types.ActionChannelbagGroups.new and bpy_extras.anim_utils
(action_get_channelbag_for_slot, action_ensure_channelbag_for_slot).
"""
import os
import sys

import bpy
from bpy_extras import anim_utils

# Blender 5.0: FCurves.new(group_name=…) and the channelbag helpers in anim_utils.
BLENDER_5 = bpy.app.version >= (5, 0, 0)


def get_channelbag(action, slot):
    """The channelbag of `action` for `slot`, or None when it has none."""
    return anim_utils.action_get_channelbag_for_slot(action, slot)


def ensure_channelbag(action, slot):
    """The channelbag of `action` for `slot`, created when missing (with the first layer
    and keyframe strip, as anim_utils.action_ensure_channelbag_for_slot does in 5.0)."""
    if BLENDER_5:
        return anim_utils.action_ensure_channelbag_for_slot(action, slot)
    layer = action.layers[0] if len(action.layers) else action.layers.new("Layer")
    strip = layer.strips[0] if len(layer.strips) else layer.strips.new(type='KEYFRAME')
    return strip.channelbag(slot, ensure=True)


def all_channelbags(action):
    """Every channelbag of `action`, over all its layers, keyframe strips and slots."""
    return [bag for layer in action.layers for strip in layer.strips for bag in strip.channelbags]


def assigned_channelbag(anim_data):
    """The channelbag of `anim_data`'s assigned action and slot, or None without both."""
    if anim_data is None or anim_data.action is None or anim_data.action_slot is None:
        return None
    return get_channelbag(anim_data.action, anim_data.action_slot)


def new_fcurve(bag, data_path, index=0, group=""):
    """A new F-curve in channelbag `bag`, in the F-curve group `group` (created when
    missing; "" for none)."""
    if BLENDER_5:
        return bag.fcurves.new(data_path, index=index, group_name=group)
    fc = bag.fcurves.new(data_path, index=index)
    if group:
        fc.group = bag.groups.get(group) or bag.groups.new(group)
    return fc


def assign_action(ob, action, slot):
    """Assign `action` and `slot` to `ob`, creating animation data if needed.

    Compares slot handles first: re-assigning the already-assigned slot on an unevaluated
    object crashes Blender 5.0.1.
    """
    ad = ob.animation_data or ob.animation_data_create()
    if ad.action != action:
        ad.action = action
    if slot is not None and ad.action_slot_handle != slot.handle:
        ad.action_slot = slot


def assigned_action(ob):
    """`ob`'s assigned action, or None."""
    return ob.animation_data.action if ob.animation_data is not None else None


def keep_unused(action):
    """Give `action` a fake user when nothing uses it any more (SignSim has just assigned a
    new action in its place): Blender does not save an action without users, and the
    animation the character had must survive in the file SignSim writes
    (bpy.types.ID.use_fake_user). None is ignored."""
    if action is not None and action.users == 0:
        action.use_fake_user = True


def assigned_slot_handle(ob):
    """The handle of `ob`'s assigned slot, or None without an assigned action."""
    ad = ob.animation_data
    return ad.action_slot_handle if ad is not None and ad.action is not None else None


def restore_action(ob, action, slot_handle):
    """Give `ob` back `action` with the slot whose handle is `slot_handle` (after a failed
    write; either may be None)."""
    ad = ob.animation_data or ob.animation_data_create()
    ad.action = action
    if action is not None and slot_handle is not None:
        for s in action.slots:
            if s.handle == slot_handle:
                assign_action(ob, action, s)


def end_process(status):
    """End a Python process that imported the bpy module with exit code `status` (int).

    The bpy 4.5 module can deadlock in its own exit handlers after some operator sequences
    (a static destructor waits on a condition variable its delayed-close thread still
    waits on), so on 4.5 this flushes stdout/stderr and leaves without them (os._exit);
    on 5.0 it returns and the process exits normally."""
    if BLENDER_5:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
