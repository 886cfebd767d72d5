"""The bake's target: the fitted reference projected onto collision-free poses.

The physics pass tracks a target instead of the reference itself (issue 34's design): a
reference that stays inside a body for whole frames would have PD tracking pull into the
body and penalty contacts push back, with light distal phalanges left in equilibria far
from both. The target is the motion the animator keyed minus interpenetration, found in
pose space by the core's resolver (solver.core.nearest_pose, after "PoseShield:
Self-Collision Resolution for Pose Editing with Neural Collision Fields"; SignSim's seed
002): per frame the least subtree-weighted change of the joint rotations with every
part pair clear by `settings.margin`, exact signed distances and joint limits as bounds,
warm-started from the previous frame's correction; each run of changed frames is then
optimised as one trajectory of least added jerk (nearest_pose.smooth_corrections), so
the target is smooth in time. Frames already clear are returned bit for bit.

Contacts the retarget kept are the motion's: on an intended contact's frames (the
(bone a, bone b, start, stop, level m) tuples of contact_ramps.intended_contacts) the
parts between a and b keep a clearance of −level instead of the margin, so the
projection never pushes a touch the reference makes apart, down to the depth the
reference has there.

Shapes and units: F frames, n bones; rotations (F, n, 4) local quaternions w-first;
distances m; angles in the Target degrees; times s.
"""

import time
from dataclasses import dataclass

import numpy as np

from ..core.nearest_pose import ResolveSettings, resolve_sequence

PROJECT_SETTINGS = ResolveSettings(margin=0.001)
"""The projection keeps 1 mm between parts: the skin test's tolerance for the hands."""


@dataclass(frozen=True, eq=False)
class Target:
    """rotations (F, n, 4): the target's local rotations (the reference's own values on
    frames that were clear); changed (F,) bool: frames the projection moved; change_deg
    (F, n): each bone's rotation change, degrees; colliding: frames whose reference
    pose was not clear (solved; the changed ones and those no pose within the joint
    limits clears); seconds: wall time of the projection."""

    rotations: np.ndarray
    changed: np.ndarray
    change_deg: np.ndarray
    colliding: int
    seconds: float

    def record(self, bone_names, frames):
        """JSON-able summary: projected frames, the largest contact-driven change (deg, bone,
        scene frame of frames (F,)) and the mean over projected frames of each frame's
        largest change (deg), the projection's seconds, in total and per colliding frame."""
        per_frame = self.change_deg.max(axis=1) if self.change_deg.size else np.zeros(len(self.changed))
        f, b = np.unravel_index(int(np.argmax(self.change_deg)), self.change_deg.shape) if self.change_deg.size \
            else (0, 0)
        return {"projected_frames": int(np.count_nonzero(self.changed)), "colliding_frames": int(self.colliding),
                "largest_change_deg": float(per_frame.max(initial=0.0)),
                "largest_change_bone": bone_names[b] if self.changed.any() else None,
                "largest_change_frame": float(frames[f]) if self.changed.any() else None,
                "mean_change_deg": float(per_frame[self.changed].mean()) if self.changed.any() else 0.0,
                "projection_seconds": float(self.seconds),
                "seconds_per_colliding_frame": float(self.seconds / self.colliding) if self.colliding else 0.0}


def intended_margins(intended, n_frames, margin):
    """Per frame (F,) {(bone a, bone b): extra clearance m} lowering the clearance of each
    intended contact's pair to −level on its frames [start, stop) (clipped to the clip):
    nearest_pose.resolve_pose's extra_margin. None without intended contacts."""
    if not intended:
        return None
    out = [{} for _ in range(n_frames)]
    for a, b, start, stop, level in intended:
        for f in range(max(int(start), 0), min(int(stop), n_frames)):
            out[f][(int(a), int(b))] = min(out[f].get((int(a), int(b)), np.inf), -(margin + float(level)))
    return out


def project(model, fields, reference, intended=(), settings=PROJECT_SETTINGS, progress=None):
    """The Target of `reference` (physics.reference.Reference, normally the fitted one) for
    model (SkeletonModel) and fields (body volumes: grid, bones, local, radius), keeping
    the intended contacts [(a, b, start, stop, level m)] as the reference has them.
    settings: nearest_pose.ResolveSettings; progress: None or callable(fraction of the frames
    projected, in [0, 1]); raising from it aborts. Deterministic: same inputs, same rotations."""
    start = time.perf_counter()
    rotations = np.asarray(reference.rotations, dtype=float)
    results = resolve_sequence(model, fields, rotations, reference.base_rotations, reference.base_positions,
                               settings, extra_margins=intended_margins(intended, len(rotations), settings.margin),
                               progress=progress)
    target = np.stack([r.rotations for r in results])  # moved bones keep their input's hemisphere
    changed = np.array([r.changed for r in results])
    colliding = int(np.count_nonzero(changed | ~np.array([r.resolved for r in results])))
    change = np.degrees(np.stack([r.change for r in results]))
    return Target(target, changed, change, colliding, time.perf_counter() - start)
