"""The Blender side of SignSim: one package per capability (library, retarget, compose,
bake, demo), each with an api.py, plus what they share (compat, keys, files, errors,
preferences, properties, translations, the CLI dispatcher). Registration: the root
__init__.py."""
