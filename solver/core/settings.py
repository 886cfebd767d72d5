"""The physics settings table: joint groups, their default gains, contact defaults, presets.

Everything else is derived from this table: solver.physics.simulate.SimSettings' defaults and
SimSettings.preset, the add-on's Physics properties (defaults and limits), the shipped
preset files (presets/signsim/physics/, written by signsim_addon/bake/physics_presets.py)
and the CLI's `bake --preset`, so a preset means the same thing everywhere.

Gains are given per joint group as a natural frequency f (Hz) and a damping ratio ζ
(1 = critical): Kp = I·ω², Kd = 2ζIω with ω = 2π·f.
"""

from dataclasses import dataclass
from types import MappingProxyType

# Joint groups (gains are set per group), in the order the Physics panel lists them.
GROUPS = ("fingers", "thumb", "wrist", "forearm", "upper_arm", "clavicle", "neck_head")
GROUP_LABELS = MappingProxyType({
    "fingers": "Fingers", "thumb": "Thumb", "wrist": "Wrist", "forearm": "Forearm",
    "upper_arm": "Upper Arm", "clavicle": "Clavicle", "neck_head": "Neck/Head"})
DEFAULT_FREQUENCY_HZ = MappingProxyType({
    "fingers": 8.0, "thumb": 8.0, "wrist": 6.0, "forearm": 5.0, "upper_arm": 5.0,
    "clavicle": 4.0, "neck_head": 4.0})
DEFAULT_DAMPING_RATIO = 1.0
OTHER_FREQUENCY_HZ = 6.0        # bones whose group is not in GROUPS

FEEDFORWARD = True
CONTACT_STIFFNESS = 3e4         # N/m, initial penalty stiffness kp
CONTACT_DAMPING = 20.0          # N·s/m
TARGET_DEPTH_MM = 0.2           # mm, the adaptive stiffness schedule's target depth
SCHEDULE = True
MAX_SUBSTEPS = 4
SUBSTEP_CHOICES = (1, 2, 4, 8, 16, 32)   # powers of two (step doubling)


@dataclass(frozen=True)
class Preset:
    """A named preset: every group's default natural frequency times frequency_scale,
    damping ratio for every group, and the contact stiffness (N/m)."""

    frequency_scale: float
    damping_ratio: float
    contact_stiffness: float


PRESETS = MappingProxyType({
    "soft": Preset(0.6, 1.0, 1.5e4),
    "default": Preset(1.0, 1.0, CONTACT_STIFFNESS),
    "stiff": Preset(1.6, 1.0, 6e4),
})


def preset_values(name) -> dict:
    """The Physics settings of preset `name` ('soft', 'default', 'stiff') as
    {"<group>_frequency" Hz, "<group>_damping", "feedforward", "contact_stiffness" N/m,
    "contact_damping" N·s/m, "target_depth_mm" mm, "use_schedule", "max_substeps"}.

    Raises ValueError for an unknown name.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset '{name}': choose {', '.join(PRESETS)}")
    p = PRESETS[name]
    values = {}
    for g in GROUPS:
        values[f"{g}_frequency"] = round(DEFAULT_FREQUENCY_HZ[g] * p.frequency_scale, 4)
        values[f"{g}_damping"] = p.damping_ratio
    values.update(feedforward=FEEDFORWARD, contact_stiffness=p.contact_stiffness,
                  contact_damping=CONTACT_DAMPING, target_depth_mm=TARGET_DEPTH_MM,
                  use_schedule=SCHEDULE, max_substeps=MAX_SUBSTEPS)
    return values
