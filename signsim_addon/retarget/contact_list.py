"""The armature's contact list (Object.signsim_contacts): one item per contact the last
retarget kept, which the animator switches off or adds to before retargeting again
(contacts.animator_choices reads it)."""
import bpy


class SignSimContact(bpy.types.PropertyGroup):
    """One contact: part_a touches part_b from frame_start to frame_end (scene frames)."""
    part_a: bpy.props.StringProperty(name="Part", description="What touches: a fingertip "
                                     "(index_R, thumb_L, …) or a palm (palm_L)")
    part_b: bpy.props.StringProperty(name="Touches", description="What it touches: a face "
                                     "region (chin, cheek_R, mouth, nose, forehead, ear_L), a "
                                     "palm or a fingertip")
    frame_start: bpy.props.IntProperty(name="Start")
    frame_end: bpy.props.IntProperty(name="End")
    enabled: bpy.props.BoolProperty(name="Keep", default=True,
                                    description="Keep this contact when retargeting again")
    added: bpy.props.BoolProperty(name="Added", description="Added by the animator, not detected")


class _ListProperty:
    """Object.signsim_contacts (CollectionProperty) and its active index."""

    def register(self):
        bpy.types.Object.signsim_contacts = bpy.props.CollectionProperty(type=SignSimContact)
        bpy.types.Object.signsim_contacts_index = bpy.props.IntProperty()

    def unregister(self):
        del bpy.types.Object.signsim_contacts_index
        del bpy.types.Object.signsim_contacts


classes = (SignSimContact,)
LIST_PROPERTY = _ListProperty()
