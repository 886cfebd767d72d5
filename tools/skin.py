"""Independent skin measurements for tests and benches (not shipped): what Blender shows,
read from the evaluated (deformed) mesh, never from the solver's own body model."""
import bpy
import numpy as np


def evaluated_world_vertices(ob):
    """World positions (V, 3) m of the evaluated mesh object `ob`'s vertices at the current
    frame (modifiers and armature deformation applied): `Object.evaluated_get` and
    `Object.to_mesh` of the Blender API."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    co = np.empty(len(me.vertices) * 3)
    me.vertices.foreach_get("co", co)
    ev.to_mesh_clear()
    m = np.array(ev.matrix_world)
    return co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
