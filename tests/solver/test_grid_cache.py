"""Body distance fields cached in memory and on disk (solver/core/grid_cache.py)."""
from solver.core import body_volumes, grid_cache


def test_body_grids_are_cached_on_disk_and_read_back_exactly(tmp_path, monkeypatch):
    """face_grid with a cache folder: the first call builds and writes the grid, a later
    call with an empty memory cache reads it back bit for bit without rebuilding, and an
    unreadable file is rebuilt instead of read."""
    v, t = body_volumes.box_mesh([-0.05, -0.04, -0.03], [0.05, 0.04, 0.03])
    built = grid_cache.face_grid(v, t, -1, 0.01, 0.02, cache_dir=str(tmp_path))
    files = list(tmp_path.glob("*.npz"))
    assert len(files) == 1
    grid_cache._GRIDS.clear()
    calls = []
    real = grid_cache.build_distance_grid
    monkeypatch.setattr(grid_cache, "build_distance_grid", lambda *a, **k: calls.append(1) or real(*a, **k))
    read = grid_cache.face_grid(v, t, -1, 0.01, 0.02, cache_dir=str(tmp_path))
    assert not calls and read.values.tobytes() == built.values.tobytes()
    assert (read.origin.tobytes(), read.spacing, read.bone, read.margin) == (
        built.origin.tobytes(), built.spacing, built.bone, built.margin)
    grid_cache._GRIDS.clear()
    files[0].write_bytes(b"not a grid")
    again = grid_cache.face_grid(v, t, -1, 0.01, 0.02, cache_dir=str(tmp_path))
    assert calls == [1] and again.values.tobytes() == built.values.tobytes()
    grid_cache._GRIDS.clear()
    assert grid_cache.face_grid(v, t, -1, 0.01, 0.02, cache_dir=str(tmp_path)).values.tobytes() == built.values.tobytes()
    assert calls == [1]  # the rebuilt grid replaced the unreadable file
    grid_cache._GRIDS.clear()
