"""Automatic bone maps between real armatures: an unnamed skeleton maps by topology."""
from retarget_rigs import stand_in_signer


def test_unnamed_skeleton_maps_by_topology(addon, shared_data):
    """The Mixamo skeleton with every bone renamed j00, j01, … maps like the named one."""
    rt = addon.signsim_addon.retarget.api
    target = stand_in_signer()
    source, _action, _fps, _cleanup = rt.source_clip(str(shared_data / "mocap" / "bvhpython_test_freebvh_mixamorig.bvh"))
    named = rt.auto_map(source, target).as_dict()
    original = [b.name for b in source.data.bones]
    for k, bone in enumerate(source.data.bones):
        bone.name = f"j{k:02d}"
    anonymous = rt.auto_map(source, target)
    renamed = {t: original[int(s[1:])] for t, s in anonymous.as_dict().items()}
    core = [t for t in named if not t.startswith("spine.00")]     # spine spread may differ
    assert {t: renamed.get(t) for t in core} == {t: named[t] for t in core}
    assert max(anonymous.confidence().values()) < 1.0
    assert len(core) >= 45
