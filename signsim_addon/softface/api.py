"""Soft face use cases: what the Soft Face operator, the bake and the tests call.

- soft_face(scene, armature, settings, frames, report) -> result dict: the head's skin
  of `armature` as an elastic layer (solver.softface), its force-dual modes from where
  the animation's fingertips come close, the reduced face simulated under the
  fingertips over `frames`, written as one shape key per mode on the character's mesh
  (relative to its basis; only head vertices move) with its coordinate keyed per frame
  on the shape key's value.
- remove(mesh object): the soft-face shape keys and their action gone again.

The fingertips are kinematic here (they follow the armature's current animation, the
baked action after a bake): each is the distal phalanx as three spheres of its pad
radius, the last one ending at the bone's tail (where the skin's tip is).
"""
import time
from dataclasses import dataclass

import bpy
import numpy as np

from ...solver import softface as sf
from .. import compat, keys
from ..errors import INFO, WARNING, SignSimError, silent
from . import head as head_api

PREFIX = "SoftFace."          # shape key names: SoftFace.00, SoftFace.01, …
ACTION_SUFFIX = ".soft_face"  # the shape keys' action: <mesh>.soft_face
FAR = 0.04                    # m: far field of a dent (locality)
NLA_TRACK = "SignSim soft face"  # where the dent plays when the shape keys have an action already


class NoFaceContact(SignSimError):
    """No fingertip of the clip comes near the face: nothing dents (the bake stands)."""


@dataclass(frozen=True, kw_only=True)
class SoftFaceSettings:
    """modes: reduced coordinates; young Pa; poisson; thickness m of tissue over the
    skull; stiffness N/m of a fingertip pad's penalty; substeps per frame (at least)."""
    modes: int = sf.MODES
    young: float = sf.YOUNG
    poisson: float = sf.POISSON
    thickness: float = sf.THICKNESS
    stiffness: float = sf.CONTACT_STIFFNESS
    substeps: int = 4


def settings_of(physics, modes=None):
    """SoftFaceSettings of an armature's Physics panel (Object.signsim.physics); modes
    overrides its number of modes."""
    return SoftFaceSettings(modes=physics.face_modes if modes is None else modes, young=physics.face_young,
                            thickness=physics.face_thickness_mm * 1e-3, stiffness=physics.contact_stiffness)


def summary(result):
    """The bake report's entry of a soft_face result: modes, peak_displacement_mm,
    far_field_ratio, build_seconds."""
    return {k: result[k] for k in ("modes", "peak_displacement_mm", "far_field_ratio", "build_seconds")}


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
    (CPU), "warnings"}. Raises SignSimError without a head skin or for bad settings,
    NoFaceContact (a SignSimError) when no fingertip comes near the face; the file is
    untouched then.
    """
    if frames is None:
        frames = np.arange(scene.frame_start, scene.frame_end + 1)
    frames = np.asarray(frames, int)
    if settings.modes < 1 or settings.substeps < 1:
        raise SignSimError(f"soft face needs at least 1 mode and 1 substep (got {settings.modes}, {settings.substeps})")
    warnings = []
    centres, radii = fingertips or fingertip_spheres(armature, frames, scene)
    centres, radii = np.asarray(centres, float), np.asarray(radii, float)
    if centres.shape[:1] != frames.shape or centres.shape[1:] != (len(radii), 3):
        raise SignSimError(f"soft face: fingertips {centres.shape} do not match {len(frames)} frames "
                           f"and {len(radii)} radii")
    head = head_api.head_skin(armature, scene.unit_settings.scale_length, near=centres.reshape(-1, 3))
    t0 = time.process_time()
    try:
        face = sf.build_face(head.vertices, head.triangles, young=settings.young, poisson=settings.poisson,
                             thickness=settings.thickness)
        weights = sf.proximity_weights(face, centres.reshape(-1, 3))
        if not weights.any():
            raise NoFaceContact(f"no fingertip comes near the face of '{head.mesh}' in this clip: "
                                "no soft face written")
        forces = sf.contact_forces(face, weights)
    except ValueError as ex:
        raise SignSimError(f"'{armature.name}': {ex}") from None
    modes = min(settings.modes, forces.shape[1])
    if modes < settings.modes:
        warnings.append(f"the fingertips come near {forces.shape[1]} skin vertices of '{head.mesh}': "
                        f"{modes} modes instead of {settings.modes}")
    basis, _ = sf.force_dual_basis(face, forces, modes)
    reduced = sf.reduce(face, basis)
    build = time.process_time() - t0
    report(INFO, f"soft face of '{head.mesh}': {len(face.vertices)} vertices, {face.tet_count} tetrahedra, "
                 f"{modes} force-dual modes in {build:.2f} s")
    coords, depth = sf.simulate(reduced, centres, radii, scene.render.fps / scene.render.fps_base,
                                settings.substeps, settings.stiffness)
    disp = np.stack([np.linalg.norm(face.displacement(basis @ c), axis=1) for c in coords])
    worst = int(np.argmax(disp.max(axis=1)))
    peak = float(disp[worst].max())
    far = sf.far_field_ratio(face, basis @ coords[worst], face.vertices[int(np.argmax(disp[worst]))], FAR)
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
