"""The Blender side of SignSim: one package per capability (library, retarget, compose,
bake, resolve, softface, demo), each with an api.py; body/ (the character as every
capability reads it: rig, skin geometry, distance fields, the skin test); the shared base
(compat, keys, files, errors); and the registration files (properties, preferences,
translations, the CLI dispatcher). Registration: the root __init__.py; layers:
docs/development.md."""
