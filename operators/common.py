"""What several operators' poll functions share."""


def active_armature(context, cls=None, message="Select an armature"):
    """The active object if it is an armature, else None.

    With ``cls`` (an operator class inside ``poll``), a None result also sets ``message``
    as the poll message, so the greyed-out button says why (``Operator.poll_message_set``).
    """
    ob = context.active_object
    if ob is not None and ob.type == 'ARMATURE':
        return ob
    if cls is not None:
        cls.poll_message_set(message)
    return None
