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


def armature_with_action(context, cls, select_message, action_message):
    """The active armature if it has an action, else None with the poll message saying
    why (select_message without an armature, action_message without an action)."""
    ob = active_armature(context, cls, select_message)
    if ob is None:
        return None
    if ob.animation_data is None or ob.animation_data.action is None:
        cls.poll_message_set(action_message)
        return None
    return ob
