"""Retargeting: bone maps and the transfer of a source clip's motion onto a target rig."""
