"""Soft face use cases: what the Soft Face operator, the bake and the tests call.

- soft_face(scene, armature, settings, frames, report) -> result dict: the head's skin
  of `armature` as an elastic layer (solver.softface.tissue), its force-dual modes from where
  the animation's fingertips come close, the reduced face simulated under the
  fingertips over `frames`, written as one shape key per mode on the character's mesh
  (relative to its basis; only head vertices move) with its coordinate keyed per frame
  on the shape key's value.
- after_bake(scene, armature, frames, on, modes, report) -> (result or None, warnings):
  the bake's soft-face step (a failure there warns, the bake stands; a stale dent of an
  earlier bake is removed);
- remove(mesh object): the soft-face shape keys and their action gone again.

The fingertips are kinematic here (they follow the armature's current animation, the
baked action after a bake): each is the distal phalanx as three spheres of its pad
radius, the last one ending at the bone's tail (where the skin's tip is).
"""
import time
from dataclasses import dataclass

import bpy
import numpy as np

from ...solver.softface import tissue
from .. import compat, keys
from ..body import geometry
from ..errors import INFO, WARNING, SignSimError, silent
from . import head as head_api

PREFIX = "SoftFace."          # shape key names: SoftFace.00, SoftFace.01, …
ACTION_SUFFIX = ".soft_face"  # the shape keys' action: <mesh>.soft_face
FAR = 0.04                    # m: far field of a dent (locality)
NLA_TRACK = "SignSim soft face"  # where the dent plays when the shape keys have an action already


@dataclass(frozen=True, kw_only=True)
class SoftFaceSettings:
    """modes: reduced coordinates; young Pa; poisson; thickness m of tissue over the
    skull; stiffness N/m of a fingertip pad's penalty; substeps per frame (at least)."""
    modes: int = tissue.MODES
    young: float = tissue.YOUNG
    poisson: float = tissue.POISSON
    thickness: float = tissue.THICKNESS
    stiffness: float = tissue.CONTACT_STIFFNESS
    substeps: int = 4


def settings_of(physics, modes=None):
    """SoftFaceSettings of an armature's Physics panel (Object.signsim.physics); modes
    overrides its number of modes."""
    return SoftFaceSettings(modes=physics.face_modes if modes is None else modes, young=physics.face_young,
                            thickness=physics.face_thickness_mm * 1e-3, stiffness=physics.contact_stiffness)


def summary(result):
    """The bake report's entry of a soft_face result: modes, peak_displacement_mm,
    far_field_ratio, max_penetration_mm, build_seconds."""
    return {k: result[k] for k in ("modes", "peak_displacement_mm", "far_field_ratio", "max_penetration_mm",
                                   "build_seconds")}


def check(settings):
    """Raise SignSimError for SoftFaceSettings no soft face can be built with."""
    s = settings
    if s.modes < 1:
        raise SignSimError(f"soft face needs at least 1 mode (got {s.modes})")
    if not (s.substeps >= 1 and s.young > 0 and 0 < s.poisson < 0.5 and s.thickness > 0 and s.stiffness > 0):
        raise SignSimError(f"soft face needs Young's modulus > 0 Pa, 0 < Poisson ratio < 0.5, thickness > 0 m, "
                           f"contact stiffness > 0 N/m and a substep (got {s.young} Pa, {s.poisson}, "
                           f"{s.thickness} m, {s.stiffness} N/m, {s.substeps})")


def after_bake(scene, armature, frames, on, modes=None, report=silent):
    """The bake's soft-face step (the Bake operator and bake_file both call it): with `on`,
    soft_face over `frames` under the baked fingertips, with the Physics panel's settings
    and `modes` (None: the panel's). A rig without head skin, a clip that never touches
    the face or shape keys the dent cannot play on give a warning and no dent (the bake
    stands). Any soft face an earlier bake left on the armature's meshes is removed
    unless this one replaces it: its dent followed other fingertips.

    Returns (soft_face result or None, warnings [str], also reported). Raises
    SignSimError for settings no soft face can be built with (check).
    """
    notes, res = [], None
    if on:
        settings = settings_of(armature.signsim.physics, modes)
        check(settings)
        try:
            res = soft_face(scene, armature, settings, frames, report=report)
        except SignSimError as ex:
            notes.append(str(ex))
    elif modes is not None:
        notes.append(f"{modes} face modes asked but the soft face is off: no dent")
    for ob in geometry.skinned_meshes(armature):
        key = ob.data.shape_keys
        stale = key is not None and any(kb.name.startswith(PREFIX) for kb in key.key_blocks)
        if stale and (res is None or ob.name != res["mesh"]):
            remove(ob)
            notes.append(f"removed the soft face an earlier bake left on '{ob.name}': it dented under other "
                         "fingertips")
    for n in notes:
        report(WARNING, n)
    return res, (res["warnings"] if res else []) + notes


def fingertip_spheres(armature, frames, scene):
    """Sphere centres (F, 3k, 3) m in the head frame and radii (3k,) m along each distal
    phalanx (head_api.fingertip_paths' tails and the bones' directions)."""
    tails, radii, heads = head_api.fingertip_paths(armature, frames, scene)
    axis = tails - heads
    length = np.linalg.norm(axis, axis=2, keepdims=True)
    unit = axis / np.maximum(length, 1e-12)
    end = tails - unit * radii[None, :, None]
    centres = np.concatenate([heads + t * (end - heads) for t in (0.0, 0.5, 1.0)], axis=1)
    return centres, np.tile(radii, 3)


def soft_face(scene, armature, settings=SoftFaceSettings(), frames=None, fingertips=None, report=silent):
    """Simulate and write the soft face of `armature` (bpy Object) over scene frames
    `frames` (F,) (default: the scene's range).

    fingertips: (centres (F, k, 3) m in the head bone's rest frame, radii (k,) m) of the
    spheres that press on the face (default: fingertip_spheres of the current animation).

    Returns {"modes", "mesh", "shape_keys", "action", "peak_displacement_mm",
    "far_field_ratio" (displacement beyond 4 cm of the deepest dent / its peak),
    "max_penetration_mm" (fingertip spheres into the deformed skin), "build_seconds"
    (CPU), "warnings"}. Raises SignSimError without a head skin, for bad settings, when
    no fingertip comes near the face or the mesh's shape keys are absolute (Blender plays
    those by evaluation time, not by key values); the file is untouched then.
    """
    if frames is None:
        frames = np.arange(scene.frame_start, scene.frame_end + 1)
    frames = np.asarray(frames, int)
    check(settings)
    warnings = []
    centres, radii = fingertips or fingertip_spheres(armature, frames, scene)
    centres, radii = np.asarray(centres, float), np.asarray(radii, float)
    if centres.shape[:1] != frames.shape or centres.shape[1:] != (len(radii), 3):
        raise SignSimError(f"soft face: fingertips {centres.shape} do not match {len(frames)} frames "
                           f"and {len(radii)} radii")
    head = head_api.head_skin(armature, scene.unit_settings.scale_length, near=centres.reshape(-1, 3))
    own = bpy.data.objects[head.mesh].data.shape_keys
    if own is not None and not own.use_relative:
        raise SignSimError(f"the shape keys of '{head.mesh}' are absolute (Relative off): a dent keyed on their "
                           "values cannot play: no soft face written")
    t0 = time.process_time()
    try:
        face = tissue.build_face(head.vertices, head.triangles, young=settings.young, poisson=settings.poisson,
                             thickness=settings.thickness)
        weights = tissue.proximity_weights(face, centres.reshape(-1, 3))
        if not weights.any():
            raise SignSimError(f"no fingertip comes near the face of '{head.mesh}' in this clip: "
                               "no soft face written")
        forces = tissue.contact_forces(face, weights)
    except ValueError as ex:
        raise SignSimError(f"'{armature.name}': {ex}") from None
    touched = face.triangles[(weights[face.triangles] > 0.5 * weights.max()).any(axis=1)]
    edge = float(np.median(np.linalg.norm(face.vertices[touched] - face.vertices[np.roll(touched, 1, axis=1)],
                                          axis=2)))
    if edge > radii.max():   # a fingertip covers less than a triangle: the dent takes the triangles' size
        warnings.append(f"the skin of '{head.mesh}' where the fingertips touch has {1e3 * edge:.0f} mm edges, "
                        f"more than a fingertip pad ({1e3 * radii.max():.0f} mm): the dent is as wide as them")
    modes = min(settings.modes, forces.shape[1])
    if modes < settings.modes:
        warnings.append(f"the fingertips come near {forces.shape[1]} skin vertices of '{head.mesh}': "
                        f"{modes} modes instead of {settings.modes}")
    basis, _ = tissue.force_dual_basis(face, forces, modes)
    reduced = tissue.reduce(face, basis)
    build = time.process_time() - t0
    report(INFO, f"soft face of '{head.mesh}': {len(face.vertices)} vertices, {face.tet_count} tetrahedra, "
                 f"{modes} force-dual modes in {build:.2f} s")
    coords, depth = tissue.simulate(reduced, centres, radii, keys.scene_fps(scene),
                                settings.substeps, settings.stiffness)
    disp = np.stack([np.linalg.norm(face.displacement(basis @ c), axis=1) for c in coords])
    worst = int(np.argmax(disp.max(axis=1)))
    peak = float(disp[worst].max())
    far = tissue.far_field_ratio(face, basis @ coords[worst], face.vertices[int(np.argmax(disp[worst]))], FAR)
    for w in warnings:
        report(WARNING, w)
    written = _write(armature, head, face, basis, frames, coords)
    return {"modes": modes, "mesh": head.mesh, "shape_keys": written["keys"], "action": written["action"],
            "peak_displacement_mm": 1e3 * peak, "far_field_ratio": far,
            "max_penetration_mm": 1e3 * float(depth.max(initial=0.0)), "build_seconds": build,
            "warnings": warnings}


def remove(ob):
    """Remove the soft-face shape keys of mesh object `ob` and their action (the basis and
    any other shape key stay)."""
    key = ob.data.shape_keys
    if key is None:
        return
    action = bpy.data.actions.get(ob.data.name + ACTION_SUFFIX)
    for kb in [kb for kb in key.key_blocks if kb.name.startswith(PREFIX)]:
        ob.shape_key_remove(kb)
    track = key.animation_data.nla_tracks.get(NLA_TRACK) if key.animation_data else None
    if track is not None:
        key.animation_data.nla_tracks.remove(track)
    if action is not None:
        bpy.data.actions.remove(action)


def _write(armature, head, face, basis, frames, coords):
    """One shape key per mode on head.mesh (its offsets = the mode scaled to its largest
    coordinate over the clip, in the mesh's own coordinates) and that key's value keyed
    per frame (coordinate / scale, within ±1)."""
    ob = bpy.data.objects[head.mesh]
    remove(ob)
    if ob.data.shape_keys is None:
        ob.shape_key_add(name="Basis", from_mix=False)
    key = ob.data.shape_keys
    base = np.empty(len(ob.data.vertices) * 3)
    key.reference_key.data.foreach_get("co", base)
    base = base.reshape(-1, 3)
    scale = np.abs(coords).max(axis=0)
    names, curves = [], []
    for j in range(basis.shape[1]):
        s = scale[j] if scale[j] > 0 else 1.0
        d = face.displacement(basis[:, j] * s)[face.welded] @ head.to_mesh.T
        co = base.copy()
        co[head.indices] += d
        kb = ob.shape_key_add(name=f"{PREFIX}{j:02d}", from_mix=False)
        kb.data.foreach_set("co", co.ravel())
        kb.slider_min, kb.slider_max = -1.0, 1.0
        kb.relative_key = key.reference_key
        names.append(kb.name)
        curves.append((f'key_blocks["{bpy.utils.escape_identifier(kb.name)}"].value', 0, "Soft face",
                       coords[:, j] / s))
    action = bpy.data.actions.new(ob.data.name + ACTION_SUFFIX)
    slot = action.slots.new(id_type='KEY', name=key.name)
    keys.write_curves(action, slot, curves, frames)
    own = compat.assigned_action(key)
    if own is None:
        compat.assign_action(key, action, slot)
    else:  # the mesh's own shape-key animation (lip sync…) keeps playing over the dent
        track = key.animation_data.nla_tracks.new()
        track.name = NLA_TRACK
        strip = track.strips.new(action.name, int(frames[0]), action)
        strip.action_slot = slot
    return {"keys": names, "action": action.name}
