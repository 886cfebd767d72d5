"""The bake's penetration measured on the character's evaluated skin, frame by frame.

The solver sees the body through its model (capsules, distance fields of the rest-pose
skin); what a viewer sees is the skin Blender deforms. Each frame of the reference and of
the baked action is measured on the evaluated skin by contact kind (body.skin.skin_depths);
this module turns both motions' depths into the bake's metrics and warnings.
Main thread only (bpy).
"""
import numpy as np

from ...solver.core.body_volumes import capsule_pair_kinds
from ...solver.physics.contact_depths import contact_depths
from ..body.fields import body_fields
from ..body.skin import SkinTest, skin_depths

# mm a contact may sink into the skin before the bake is said to leave a penetration:
# a fingertip on the face must look like a touch, hands and fingers tolerate a little more
KIND_LIMIT_MM = {"hand–face": 0.5}
DEFAULT_LIMIT_MM = 1.0


def model_depths(job, rotations):
    """{contact kind: (F,) m, ≥ 0}: the body model's penetration depths of rotations
    (F, n, 4) on job's base (bake.job.BakeJob): the rig's capsules and body fields as the
    bake builds them, nothing discounted (no held overlap, no intended contact), so that
    it compares with skin_depths of the same motion (solver.physics.contact_depths.skin_agreement)."""
    rig, ref, st = job.rig, job.reference, job.settings
    fields = body_fields(rig, st.sdf_spacing, st.sdf_margin, job.grid_cache)
    return contact_depths(rig.model, rotations, ref.base_positions, ref.base_rotations, fields,
                          capsule_pair_kinds(rig.model, rig.parts))


def side_record(depths):
    """The skin metrics of one motion from skin_depths' {kind: (F,) m}: JSON-able
    {"skin_penetration_max_mm", "skin_penetration_p95_mm" (of the per-frame deepest),
    "skin_frames_penetrating" (frames where any tested skin intersects),
    "skin_penetration_max_mm_by_kind", "skin_frames_penetrating_by_kind",
    "per_frame_skin_penetration_mm" (F,), "per_frame_skin_penetration_mm_by_kind"}."""
    n = len(next(iter(depths.values()))) if depths else 0
    deepest = np.max(np.stack(list(depths.values())), axis=0) if depths else np.zeros(n)
    mm = 1e3 * deepest
    return {"skin_penetration_max_mm": float(mm.max(initial=0.0)),
            "skin_penetration_p95_mm": float(np.percentile(mm, 95)) if n else 0.0,
            "skin_frames_penetrating": int(np.count_nonzero(deepest > 0)),
            "skin_penetration_max_mm_by_kind": {k: float(1e3 * d.max(initial=0.0)) for k, d in depths.items()},
            "skin_frames_penetrating_by_kind": {k: int(np.count_nonzero(d > 0)) for k, d in depths.items()},
            "per_frame_skin_penetration_mm": np.round(mm, 4).tolist(),
            "per_frame_skin_penetration_mm_by_kind": {k: np.round(1e3 * d, 4).tolist() for k, d in depths.items()}}


def skin_warnings(reference, baked, frames):
    """[str]: each contact kind whose skin the bake leaves deeper than its limit
    (KIND_LIMIT_MM, else DEFAULT_LIMIT_MM), with the frames and the reference's depth;
    reference, baked: skin_depths of both motions; frames (F,) scene frames."""
    out = []
    for kind, d in baked.items():
        mm = 1e3 * d
        limit = KIND_LIMIT_MM.get(kind, DEFAULT_LIMIT_MM)
        over = mm > limit
        if not over.any():
            continue
        worst = int(np.argmax(mm))
        ref = 1e3 * float(reference.get(kind, np.zeros(1)).max())
        out.append(f"on the skin the bake leaves {kind} penetration of {mm[worst]:.1f} mm (frame {frames[worst]:.0f}; "
                   f"deeper than {limit:g} mm on {int(np.count_nonzero(over))} frames; the reference: {ref:.1f} mm)")
    return out


def measure(scene, ob, job, reference_action, baked_action, slot_identifier, progress=None):
    """({"reference": side_record, "baked": side_record}, [warnings]) of the skin of
    armature `ob` under both actions at job.frames (bake.job.BakeJob), or (None,
    [a warning]) when `ob` deforms no mesh. progress: None or callable(fraction of the
    frames measured, the reference's then the bake's)."""
    if not job.rig.skinned:
        return None, [f"armature '{ob.name}' deforms no mesh: penetration is the body model's (capsules and "
                      "distance fields), not measured on a skin"]
    test = SkinTest(ob, job.rig)
    depths = {side: skin_depths(scene, ob, action, action.slots[slot_identifier], job.rig, job.frames, test,
                                None if progress is None else (lambda x, j=j: progress((j + x) / 2)))
              for j, (side, action) in enumerate((("reference", reference_action), ("baked", baked_action)))}
    return ({side: side_record(d) for side, d in depths.items()},
            skin_warnings(depths["reference"], depths["baked"], job.frames))
