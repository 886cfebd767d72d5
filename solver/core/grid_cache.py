"""Body distance fields, remembered: face_grid is sdf.build_distance_grid with the most
recent grids kept in memory and, given a folder, every grid stored there as a .npz file
(batch workers, the command line and the next session read it instead of rebuilding).
The key is the mesh's bytes, the grid's parameters and the bytes of sdf.py itself."""

import hashlib
import os
import pathlib

import numpy as np

from . import sdf
from .sdf import build_distance_grid


_GRIDS = {}  # the last body distance fields, by mesh and grid parameters
_GRIDS_KEPT = 8  # face, torso and two palms of the last two rigs
# The grid builder's own source is part of each cache key: a changed algorithm never
# reads grids built by the old one.
_SDF_VERSION = hashlib.sha256(pathlib.Path(sdf.__file__).read_bytes()).hexdigest()[:16]


def face_grid(vertices, triangles, bone, spacing, margin, reach=None, cache_dir=None):
    """solver.core.sdf.build_distance_grid, remembered: re-baking the same rig reuses its body
    fields (seconds for a dense head mesh). Keeps the _GRIDS_KEPT most recent grids in
    memory and, with cache_dir, every grid as a .npz file there (so that batch workers,
    the CLI and the next session do not rebuild them)."""
    key = (hashlib.sha256(np.ascontiguousarray(vertices).tobytes()
                          + np.ascontiguousarray(triangles).tobytes()).hexdigest(), bone, spacing, margin, reach)
    if key not in _GRIDS:
        while len(_GRIDS) >= _GRIDS_KEPT:
            _GRIDS.pop(next(iter(_GRIDS)))
        grid = _stored_grid(key, cache_dir)
        if grid is None:
            grid = build_distance_grid(vertices, triangles, bone, spacing, margin, reach=reach)
            if cache_dir:
                _store_grid(key, cache_dir, grid)
        _GRIDS[key] = grid
    return _GRIDS[key]


def _grid_path(key, cache_dir):
    name = hashlib.sha256(repr((key, _SDF_VERSION)).encode()).hexdigest()
    return pathlib.Path(cache_dir) / f"{name}.npz"


def _stored_grid(key, cache_dir):
    """The cached DistanceGrid for key, or None (no cache, no file, unreadable file)."""
    if not cache_dir:
        return None
    try:
        with np.load(_grid_path(key, cache_dir)) as z:
            return sdf.DistanceGrid(z["origin"], float(z["spacing"]), z["values"], int(z["bone"]), float(z["margin"]))
    except (OSError, KeyError, ValueError):
        return None


def _store_grid(key, cache_dir, grid):
    """Write grid to the cache (atomically: a reader never sees half a file); errors ignored."""
    path = _grid_path(key, cache_dir)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    try:
        np.savez(tmp, origin=grid.origin, spacing=grid.spacing, values=grid.values, bone=grid.bone,
                 margin=grid.margin)
        os.replace(tmp, path)
    except OSError:  # a read-only or full disk only costs the rebuild next time
        tmp.unlink(missing_ok=True)
