"""Composition of clips on arrays: splices, blend windows, alignment, seam checks.

Entry points:
    composition.compose          clips in order -> one track, its seams and planted feet
    composition.splice, composition.align, composition.check_seam, composition.apply_layer

This file imports nothing: import the modules themselves.
"""
