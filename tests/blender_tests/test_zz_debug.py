import json, pathlib, sys
import bpy, numpy as np
sys.path.insert(0, str(pathlib.Path(__file__).parent))
ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SAMPLES = ROOT / "sample_blends"


def test_debug(addon, tmp_path):
    out = tmp_path / "f.blend"
    assert addon.signsim_addon.cli.main(["retarget", "--clip", str(SAMPLES / "fingerspelling.bvh"),
                                         "--rig", str(SAMPLES / "signer.blend"), "--out", str(out)]) == 0
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    rig = bpy.data.objects["Signer"]
    bake = addon.signsim_addon.bake
    solver = addon.solver
    job = bake.prepare(bpy.context.scene, rig, report=print)
    solved = bake.solve(job)
    m = solved.metrics
    print(m["warnings"], m["hinges_freed"], len(m["limits_widened"]))
    print(m["reference"]["penetration_max_mm_by_kind"], m["baked"]["penetration_max_mm_by_kind"])
    fields = bake.body_fields(job.rig, 0.005, 0.02)
    model = job.rig.model
    ref = job.reference
    for name, rot in (("ref", ref.rotations), ("baked", solved.rotations)):
        d = solver.body.contact_depths(model, rot, ref.base_positions, ref.base_rotations, fields,
                                       solver.body.capsule_pair_kinds(model, job.rig.parts))
        print(name, {k: np.round(1e3 * v[:4], 2).tolist() for k, v in d.items() if v.max() > 0})
    err = np.degrees(solver.quat.angle_between(ref.rotations, solved.rotations))
    for f in range(4):
        print(f, [(job.rig.bone_names[i], round(e, 1)) for i, e in enumerate(err[f]) if e > 5])
    print(m["baked"]["tracking_rms_deg_per_group"], m["reference"]["penetration_max_mm"], m["baked"]["penetration_max_mm"])
