"""Compare a physics bake with its reference in the viewport: switch, or show a ghost."""
import bpy

from .. import compat
from .job import TRACK_PHYSICS

GHOST_SUFFIX = ".reference_ghost"


def baked_pair(ob):
    """(reference action, baked action, slot identifier) of armature `ob`, or None.

    Found from the NLA physics track, the assigned baked action, or a bake whose
    reference is the assigned action (Action.signsim.reference_action).
    """
    ad = ob.animation_data
    if ad is None:
        return None
    track = ad.nla_tracks.get(TRACK_PHYSICS)
    if track is not None and len(track.strips):
        strip = track.strips[0]
        baked = strip.action
        return baked.signsim.reference_action, baked, strip.action_slot.identifier
    act = ad.action
    if act is None or ad.action_slot is None:
        return None
    if act.signsim.reference_action is not None:
        return act.signsim.reference_action, act, ad.action_slot.identifier
    baked = next((a for a in bpy.data.actions if a.signsim.reference_action == act), None)
    return (act, baked, ad.action_slot.identifier) if baked else None


def toggle(ob) -> str:
    """Switch `ob` between reference and baked motion; returns what is shown now
    ('reference' or 'baked'). NLA output mutes/unmutes the physics track instead."""
    ref, baked, slot = baked_pair(ob)
    ad = ob.animation_data
    track = ad.nla_tracks.get(TRACK_PHYSICS)
    if track is not None:
        track.mute = not track.mute
        return "reference" if track.mute else "baked"
    target = ref if ad.action == baked else baked
    compat.assign_action(ob, target, target.slots[slot])
    return "baked" if target == baked else "reference"


def toggle_ghost(scene, ob):
    """Add (or remove, if present) a wireframe copy of `ob` playing the reference action.

    The ghost shares the armature data (same rest pose) and draws in front. Returns the
    ghost object, or None when it was removed.
    """
    name = ob.name + GHOST_SUFFIX
    ghost = bpy.data.objects.get(name)
    if ghost is not None:
        bpy.data.objects.remove(ghost)
        return None
    ref, _baked, slot = baked_pair(ob)
    ghost = bpy.data.objects.new(name, ob.data)
    ghost.parent = ob.parent
    ghost.matrix_world = ob.matrix_world
    ghost.display_type = 'WIRE'
    ghost.show_in_front = True
    ghost.hide_select = True
    ghost.hide_render = True
    compat.assign_action(ghost, ref, ref.slots[slot])
    scene.collection.objects.link(ghost)
    return ghost
