"""Soft face: the skin of the head as an elastic layer on a rigid skull under fingertip contact.

Entry points:
    tissue.build_face, tissue.reduce   the face model and its reduced modes
    tissue.simulate              the face's displacement over a clip

This file imports nothing: import the modules themselves.
"""
