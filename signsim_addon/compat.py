"""The one place for Blender's layered-action API (actions, slots, channelbags) and its
workarounds; code elsewhere never touches `action_slot` or channelbags directly.

Source: Blender Python API, bpy.types.AnimData (action, action_slot, action_slot_handle)
and bpy_extras.anim_utils (action_get_channelbag_for_slot,
action_ensure_channelbag_for_slot).
"""
from bpy_extras import anim_utils


def get_channelbag(action, slot):
    """The channelbag of `action` for `slot`, or None when it has none."""
    return anim_utils.action_get_channelbag_for_slot(action, slot)


def ensure_channelbag(action, slot):
    """The channelbag of `action` for `slot`, created when missing."""
    return anim_utils.action_ensure_channelbag_for_slot(action, slot)


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
