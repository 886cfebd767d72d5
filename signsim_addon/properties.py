"""SignSim's data on Blender IDs: one PointerProperty per ID type, named `signsim`.

- Scene.signsim: UI state of the sidebar (library filter, selections).
- Object.signsim: per-armature settings (bone map, physics gains, schedules).
- Action.signsim: clip metadata and bake provenance.

Each capability adds its fields to these groups; nothing else is stored elsewhere.
"""
import bpy

from ..solver.core import settings
from ..solver.softface import tissue
from ..solver.core.settings import GROUP_LABELS, GROUPS


def _physics_annotations():
    ann = {}
    for g in GROUPS:
        label = GROUP_LABELS[g]
        ann[f"{g}_frequency"] = bpy.props.FloatProperty(
            name=f"{label} Frequency", default=settings.DEFAULT_FREQUENCY_HZ[g], min=0.1, soft_max=30.0, unit='NONE',
            description=f"Natural frequency of the {label.lower()} PD tracking, in Hz "
                        "(Kp = I·ω², ω = 2π·f)")
        ann[f"{g}_damping"] = bpy.props.FloatProperty(
            name=f"{label} Damping", default=settings.DEFAULT_DAMPING_RATIO, min=0.05, soft_max=3.0,
            description=f"Damping ratio ζ of the {label.lower()} PD tracking (1 = critical; Kd = 2ζIω)")
    ann.update(
        feedforward=bpy.props.BoolProperty(
            name="Feedforward", default=settings.FEEDFORWARD,
            description="Add the inverse-dynamics torque of the reference (RNEA), so low gains track without lag"),
        contact_stiffness=bpy.props.FloatProperty(
            name="Contact Stiffness", default=settings.CONTACT_STIFFNESS, min=1.0, description="Penalty stiffness kp, in N/m"),
        contact_damping=bpy.props.FloatProperty(
            name="Contact Damping", default=settings.CONTACT_DAMPING, min=0.0, description="Contact damping kd, in N·s/m"),
        target_depth_mm=bpy.props.FloatProperty(
            name="Target Depth", default=settings.TARGET_DEPTH_MM, min=0.01, soft_max=2.0,
            description="Penetration depth the adaptive stiffness schedule aims at, in mm"),
        use_schedule=bpy.props.BoolProperty(
            name="Adaptive Stiffness", default=settings.SCHEDULE,
            description="Adapt the contact stiffness each frame towards the target depth"),
        contact_multiplier=bpy.props.FloatProperty(
            name="Stiffness Multiplier", default=1.0, min=0.01, soft_max=10.0, options={'ANIMATABLE'},
            description="Animator's multiplier on the contact stiffness; key it to make a schedule"),
        max_substeps=bpy.props.EnumProperty(
            name="Max Substeps", default=str(settings.MAX_SUBSTEPS),
            items=[(str(n), str(n), f"At most {n} solver step{'s' if n > 1 else ''} per frame", n)
                   for n in settings.SUBSTEP_CHOICES],
            description="Most solver steps per frame chosen by the step-doubling error estimate"),
        simulate_parts=bpy.props.EnumProperty(
            name="Simulated", options={'ENUM_FLAG'}, default=set(GROUPS),
            items=[(g, GROUP_LABELS[g], f"Simulate the {GROUP_LABELS[g].lower()} bones") for g in GROUPS],
            description="Joint groups the physics pass simulates; the rest follows the reference"),
        project=bpy.props.BoolProperty(
            name="Project", default=False,
            description="Track a target: the fitted reference moved the least so that no body part is inside "
                        "another (contacts the retarget kept stay); off: track the reference itself"),
        face_object=bpy.props.PointerProperty(
            name="Face", type=bpy.types.Object, poll=lambda self, ob: ob.type == 'MESH',
            description="Mesh used as the face for hand–face contact (default: a mesh parented to the head bone)"),
        output_mode=bpy.props.EnumProperty(
            name="Output", default='ASSIGN',
            items=[('ASSIGN', "Assign", "Assign the baked action to the armature"),
                   ('NLA', "NLA Tracks", "Stack the baked action as an NLA track over the reference")]),
        key_tolerance_deg=bpy.props.FloatProperty(
            name="Key Reduction", default=0.0, min=0.0, soft_max=2.0,
            description="Thin the baked keys while staying within this angle of the every-frame bake, "
                        "in degrees (0 keeps a key on every frame)"),
        soft_face=bpy.props.BoolProperty(
            name="Soft Face", default=False,
            description="After the bake, dent the head's skin under the fingertips: force-dual modes as shape keys "
                        "on the character's mesh, keyed per frame"),
        face_modes=bpy.props.IntProperty(
            name="Face Modes", default=tissue.MODES, min=1, max=100,
            description="Number of force-dual modes (shape keys) of the soft face"),
        face_young=bpy.props.FloatProperty(
            name="Tissue Stiffness", default=tissue.YOUNG, min=100.0, max=1e7,
            description="Young's modulus of the facial soft tissue, in Pa"),
        face_thickness_mm=bpy.props.FloatProperty(
            name="Tissue Thickness", default=1e3 * tissue.THICKNESS, min=1.0, max=50.0,
            description="Soft tissue between the skin and the skull, in mm"),
    )
    return ann


SignSimPhysicsSettings = type("SignSimPhysicsSettings", (bpy.types.PropertyGroup,), {
    "__doc__": "Physics-pass settings of one armature (joint-group gains, contacts, bake output).",
    "__annotations__": _physics_annotations(),
})


class SignSimClipItem(bpy.types.PropertyGroup):
    """One row of the sidebar's library list (a mirror of a clip in the library file;
    `name` is the clip's action name there)."""
    tags: bpy.props.StringProperty(name="Tags", description="Comma-separated asset tags")
    catalog: bpy.props.StringProperty(name="Catalog")
    fps: bpy.props.FloatProperty(name="FPS")
    frames: bpy.props.IntProperty(name="Frames")
    duration: bpy.props.FloatProperty(name="Duration", unit='TIME_ABSOLUTE')
    bones: bpy.props.IntProperty(name="Bones")
    skeleton: bpy.props.StringProperty(name="Skeleton", description="Skeleton signature")
    source: bpy.props.StringProperty(name="Source", subtype='FILE_PATH')
    warnings: bpy.props.StringProperty(name="Warnings")


class SignSimSceneSettings(bpy.types.PropertyGroup):
    """Sidebar state for one scene."""
    library_path: bpy.props.StringProperty(
        name="Library", subtype='FILE_PATH',
        description="Motion library .blend for this scene (empty: the one in the preferences)")
    clips: bpy.props.CollectionProperty(type=SignSimClipItem)
    clip_index: bpy.props.IntProperty(name="Clip", default=-1)
    filter_text: bpy.props.StringProperty(
        name="Filter", description="Only clips whose name, catalog, source file or tags "
        "contain every word", options={'TEXTEDIT_UPDATE'})
    filter_tags: bpy.props.StringProperty(
        name="Tags", description="Comma-separated tags the clips must have",
        options={'TEXTEDIT_UPDATE'})
    filter_any: bpy.props.BoolProperty(
        name="Any Tag", description="Show clips with any of the tags instead of all of them")
    # Bake and Stiffness Schedule panels (the operators take these as arguments)
    bake_use_range: bpy.props.BoolProperty(
        name="Frame Range", description="Bake only the frames from Start to End "
        "(off: every keyed frame of the action)")
    bake_frame_start: bpy.props.IntProperty(
        name="Start", default=1, min=0, description="First frame to bake (scene frame)")
    bake_frame_end: bpy.props.IntProperty(
        name="End", default=250, min=0, description="Last frame to bake (scene frame)")
    schedule_frame_start: bpy.props.IntProperty(
        name="From", default=1, description="First frame of the phase to key (scene frame)")
    schedule_frame_end: bpy.props.IntProperty(
        name="To", default=10, description="Last frame of the phase to key (scene frame)")


class SignSimBoneMapItem(bpy.types.PropertyGroup):
    """One bone map pair: which source bone drives this target bone (retarget/transfer.py)."""
    target: bpy.props.StringProperty(name="Target", description="Bone of this armature")
    source: bpy.props.StringProperty(name="Source", description="Bone of the source armature "
                                     "that drives the target bone (empty: not driven)")
    confidence: bpy.props.FloatProperty(name="Confidence", min=0.0, max=1.0, default=1.0,
                                        description="1 = matched by naming convention, lower = "
                                        "inferred from the hierarchy or set by hand")


_CURVES = [("linear", "Linear", "α = s: constant speed, corners at both ends"),
           ("smoothstep", "Smoothstep", "α = 3s² − 2s³: starts and ends at rest (C¹)"),
           ("smootherstep", "Smootherstep", "α = 6s⁵ − 15s⁴ + 10s³: also no jump in acceleration (C²)")]


class SignSimComposeClip(bpy.types.PropertyGroup):
    """One clip of a composition and the seam into it (compose/api.py)."""
    clip: bpy.props.StringProperty(
        name="Clip", description="Library clip name, mocap file (BVH, FBX, glTF) or an action of this file")
    trim_in: bpy.props.IntProperty(name="In", min=0, description="First frame of the clip to use (0: its start)")
    trim_out: bpy.props.IntProperty(name="Out", min=0, description="Last frame of the clip to use (0: its end)")
    window: bpy.props.IntProperty(
        name="Window", default=-1, min=-1, soft_max=120,
        description="Blend window into this clip, in frames (-1: the suggested window, 0: a hard cut)")
    curve: bpy.props.EnumProperty(name="Curve", items=_CURVES, default="smoothstep",
                                  description="Blend weight curve of the seam into this clip")
    suggested_window: bpy.props.IntProperty(
        name="Suggested", default=-1, description="Shortest window that passes every seam check "
        "(from the last compose; -1: not composed yet)")
    velocity_jump: bpy.props.FloatProperty(
        name="Velocity Jump", description="Seam velocity jump D = |v_A(end) - v_B(start)| of the last compose, "
        "in rad/s")
    worst: bpy.props.StringProperty(
        name="Worst Bones", description="Bones closest to (or past) their seam limits in the last compose")
    flagged: bpy.props.BoolProperty(name="Flagged", description="The seam failed a check (a bone's velocity "
                                    "jump or one-frame turn, or the root's step)")


class SignSimComposeLayer(bpy.types.PropertyGroup):
    """An additive layer of a composition: q = q_base ⊗ (q_layer ⊗ q_ref⁻¹)^weight."""
    clip: bpy.props.StringProperty(
        name="Layer", description="Library clip name, mocap file or an action of this file")
    bones: bpy.props.StringProperty(
        name="Bones", description="Comma-separated bones the layer may change (empty: all)")
    start: bpy.props.IntProperty(name="Start", min=0, description="Frame offset of the layer in the composition")
    weight: bpy.props.FloatProperty(
        name="Weight", default=1.0, min=0.0, soft_max=1.0, options={'ANIMATABLE'},
        description="How much of the layer's motion is added (key it to fade the layer in and out)")


class SignSimComposeSettings(bpy.types.PropertyGroup):
    """The sequence the Compose panel and operator work on."""
    clips: bpy.props.CollectionProperty(type=SignSimComposeClip)
    clip_index: bpy.props.IntProperty(name="Clip", default=0)
    layers: bpy.props.CollectionProperty(type=SignSimComposeLayer)
    layer_index: bpy.props.IntProperty(name="Layer", default=0)
    threshold: bpy.props.FloatProperty(
        name="Threshold", default=0.0, min=0.0,
        description="Largest velocity jump of any bone at a seam, in rad/s (0: per bone, from the two "
        "clips' own motion)")
    keep_height: bpy.props.BoolProperty(
        name="Keep Height", description="Rigs without legs: each clip keeps its own root height (with legs, "
        "every clip stands on the first clip's floor)")
    foot_lock: bpy.props.BoolProperty(
        name="Foot Lock", default=True,
        description="Hold a foot planted across a seam at one spot (two-bone leg IK), released at lift-off")


class SignSimObjectSettings(bpy.types.PropertyGroup):
    """Per-armature settings."""
    compose: bpy.props.PointerProperty(type=SignSimComposeSettings)
    is_preview: bpy.props.BoolProperty(
        name="Clip Preview", description="Made by the library's preview; replaced by the next one")
    bone_map: bpy.props.CollectionProperty(type=SignSimBoneMapItem, name="Bone Map")
    bone_map_index: bpy.props.IntProperty(name="Active Pair", default=0)
    bone_map_source: bpy.props.StringProperty(
        name="Source Armature", description="Armature whose motion is retargeted onto this one")
    physics: bpy.props.PointerProperty(type=SignSimPhysicsSettings)


class SignSimActionSettings(bpy.types.PropertyGroup):
    """Clip metadata and provenance of an action."""
    compose_report: bpy.props.StringProperty(
        name="Compose Report", description="JSON of the composition that made this action: clips, seams "
        "(window, velocity jump, threshold, flagged)")
    is_clip: bpy.props.BoolProperty(name="Library Clip")
    source_path: bpy.props.StringProperty(name="Source", subtype='FILE_PATH')
    source_format: bpy.props.StringProperty(name="Format", description="BVH, FBX or GLTF")
    sha256: bpy.props.StringProperty(name="SHA-256", description="Checksum of the source file")
    clip_key: bpy.props.StringProperty(
        name="Clip Key", description="Animation stack/animation name inside the source file")
    fps: bpy.props.FloatProperty(name="FPS", description="The clip's true frame rate")
    frame_count: bpy.props.IntProperty(name="Frames")
    frame_start: bpy.props.FloatProperty(name="First Frame")
    frame_end: bpy.props.FloatProperty(name="Last Frame")
    duration: bpy.props.FloatProperty(name="Duration", unit='TIME_ABSOLUTE',
                                      description="Frames × frame time, in seconds")
    trimmed_frames: bpy.props.IntProperty(
        name="Trimmed Frames", description="Leading calibration frames removed on import")
    bone_count: bpy.props.IntProperty(name="Bones")
    skeleton_signature: bpy.props.StringProperty(
        name="Skeleton", description="Hash of bone names and parent links")
    skeleton: bpy.props.PointerProperty(
        name="Source Skeleton", type=bpy.types.Object,
        description="The armature the clip was captured on, in its rest pose")
    catalog: bpy.props.StringProperty(name="Catalog", description="Asset catalog path")
    warnings: bpy.props.StringProperty(name="Warnings", description="Import warnings, one per line")
    reference_action: bpy.props.PointerProperty(
        type=bpy.types.Action, name="Reference",
        description="The action this physics bake tracked (never modified by the bake)")
    bake_metrics: bpy.props.StringProperty(name="Bake Metrics", description="Metrics JSON of the bake")
    bake_settings: bpy.props.StringProperty(name="Bake Settings", description="Settings JSON of the bake")


classes = (SignSimClipItem, SignSimPhysicsSettings, SignSimSceneSettings, SignSimBoneMapItem,
           SignSimObjectSettings, SignSimActionSettings)
POINTERS = (  # registered after the classes, by the root __init__.py
    (bpy.types.Scene, SignSimSceneSettings),
    (bpy.types.Object, SignSimObjectSettings),
    (bpy.types.Action, SignSimActionSettings),
)
# the compose groups register before the object settings that point to them
_at = classes.index(SignSimObjectSettings)
classes = classes[:_at] + (SignSimComposeClip, SignSimComposeLayer, SignSimComposeSettings) + classes[_at:]
