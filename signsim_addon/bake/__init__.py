"""The physics bake: rig reading, the bake job, schedules, preview, metrics, batch, presets."""
