"""Soft face benchmark: mode build time, reduced step time, locality of force-dual modes
against linear modal analysis with the same number of modes.

    .venv/bin/python bench/bench_soft_face.py [--modes 20] [--thickness-mm 10] [--poisson 0.45] [--json]

Heads: the bundled signer's skin (the head patch of SignerBody, as the bake uses it),
its separate face mesh SignerFace (closed, ~20 k vertices: the build-time case) and the
CC0 Godot base mesh from ../shared/data (skipped without it). The force model of the
signer comes from its chin_cheek clip (the fingertips' paths, imported from the BVH
file); the other heads get fingertips approaching their chin and right cheek landmarks
along the skin normal (3 cm to touching). Figures, all CPU time (time.process_time) on
one thread (threadpoolctl), so the other jobs of a shared machine count less:

- build: tissue layer (H, M) + the force-dual modes (factorisation, randomised SVD);
  modal: the same number of modes by scipy's eigsh (for comparison only);
- step: one reduced backward Euler step with a fingertip pressed 2 mm into the last
  touched spot; steps per second on one core;
- locality: a 1 N press on each touched spot (where the fingertips come within 3 mm of
  the skin, one per nearest face landmark), its static response in each subspace and
  in the full model (H⁻¹ f): peak displacement (mm) and the largest displacement beyond
  4 cm of the spot as a percentage of the peak.
"""
import argparse
import importlib
import json
import pathlib
import sys
import time

import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "tools"))
import devenv  # noqa: E402

TMP = devenv.isolate_user_resources("signsim-bench-")

import bpy  # noqa: E402
import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

ADDON = devenv.enable_from_source(TMP)
sf = importlib.import_module(ADDON.__name__ + ".solver.softface.tissue")
head_api = importlib.import_module(ADDON.__name__ + ".signsim_addon.softface.head")
SPOTS = ("chin", "cheek_R")
FAR = 0.04  # m


def approach(head, spots, radius=0.0075):
    """Fingertip centres (k, 3) m moving to each spot along its outward normal, 3 cm → touching."""
    face = sf.build_face(head.vertices, head.triangles)
    out = []
    for p in spots:
        i = int(np.argmin(np.linalg.norm(face.vertices - p, axis=1)))
        out += [p + (radius + s) * face.normals[i] for s in np.linspace(0.03, 0.0, 16)]
    return np.array(out)


def heads(modes):
    """[(name, HeadSkin, fingertip sample points (k, 3) m, pad radius m, pinned or None)]."""
    out = []
    bpy.ops.wm.open_mainfile(filepath=str(ROOT / "sample_blends" / "signer.blend"))
    signer = bpy.data.objects["Signer"]
    skin = head_api.head_skin(signer)
    bpy.ops.import_anim.bvh(filepath=str(ROOT / "sample_blends" / "chin_cheek.bvh"),
                            axis_forward='Y', axis_up='Z')
    clip = bpy.context.active_object
    first, last = (int(f) for f in clip.animation_data.action.frame_range)
    paths, radii, _ = head_api.fingertip_paths(clip, np.arange(first, last + 1), bpy.context.scene)
    out.append(("signer skin (chin_cheek clip)", skin, paths.reshape(-1, 3), float(radii[0])))
    face_ob = bpy.data.objects["SignerFace"]
    co, tris = ADDON.signsim_addon.body.geometry.mesh_arrays(face_ob.data)
    m = np.linalg.inv(np.array(signer.data.bones[skin.head_bone].matrix_local)) @ \
        np.linalg.inv(np.array(signer.matrix_world)) @ \
        ADDON.signsim_addon.body.geometry.rest_world(signer, face_ob)
    dense = head_api.HeadSkin("SignerFace", np.arange(len(co)), co @ m[:3, :3].T + m[:3, 3], tris,
                              np.eye(3), skin.head_bone, skin.axes, 1.0)
    out.append(("SignerFace (closed, 20 k vertices; chin_cheek clip)", dense, paths.reshape(-1, 3),
                float(radii[0])))
    glb = DATA / "characters" / "godot_male_base_mesh_cc0.glb"
    if glb.is_file():
        bpy.ops.wm.read_homefile(use_empty=True)
        bpy.ops.import_scene.gltf(filepath=str(glb))
        arm = next(o for o in bpy.data.objects if o.type == 'ARMATURE')
        cc0 = head_api.head_skin(arm)
        spots = [head_api.landmark(cc0, s) for s in SPOTS]
        out.append(("CC0 base mesh (fingertips at chin and cheek)", cc0, approach(cc0, spots), 0.0075))
    return out


def measure(name, head, samples, radius, modes, thickness, poisson):
    t0 = time.process_time()
    face = sf.build_face(head.vertices, head.triangles, thickness=thickness, poisson=poisson)
    t1 = time.process_time()
    lu = sf.factorize(face.H)
    weights = sf.proximity_weights(face, samples)
    fd, _ = sf.force_dual_basis(face, sf.contact_forces(face, weights), modes, lu=lu)
    reduced = sf.reduce(face, fd)
    t2 = time.process_time()
    lma, _ = sf.modal_basis(face, modes, lu=lu)
    t3 = time.process_time()
    row = {"head": name, "vertices": len(face.vertices), "dofs": face.n, "tets": face.tet_count,
           "support_vertices": int((weights > 1e-3 * weights.max()).sum()),
           "layer_s": t1 - t0, "build_s": t2 - t0, "modal_s": t3 - t2 + (t1 - t0), "spots": {}}
    modal = sf.reduce(face, lma)
    touched = head_api.touch_spots(head, samples, within=radius + 0.003)
    for spot_name, spot in touched.items():
        f = sf.point_force(face, spot, 1.0)
        full = lu.solve(f)
        r = {}
        for kind, red in (("force_dual", reduced), ("modal", modal)):
            u = sf.static_displacement(red, f)
            r[kind] = {"peak_mm": 1e3 * float(np.linalg.norm(face.displacement(u), axis=1).max()),
                       "far_pct": 100 * sf.far_field_ratio(face, u, spot, FAR)}
        r["full"] = {"peak_mm": 1e3 * float(np.linalg.norm(face.displacement(full), axis=1).max()),
                     "far_pct": 100 * sf.far_field_ratio(face, full, spot, FAR)}
        row["spots"][spot_name] = r
    # step timing: a fingertip 2 mm into the last touched spot, the face starting at rest
    i = int(np.argmin(np.linalg.norm(face.vertices - list(touched.values())[-1], axis=1)))
    centre = face.vertices[i] + (radius - 0.002) * face.normals[i]
    q, v = np.zeros(modes), np.zeros(modes)
    n = 600
    t4 = time.process_time()
    contact = sf.Contact(np.zeros(1), np.zeros((1, 3)))
    for _ in range(n):   # a held press: each step starts at the penalty the last one needed
        q, v, contact = sf.step(reduced, q, v, 1 / 240, [centre], [radius], level=contact.level)
    t5 = time.process_time()
    row["step_ms"] = 1e3 * (t5 - t4) / n
    row["steps_per_s"] = n / (t5 - t4)
    row["press_peak_mm"] = 1e3 * float(np.linalg.norm(face.displacement(fd @ q), axis=1).max())
    row["press_penetration_mm"] = 1e3 * float(contact.depth[0])
    t6 = time.process_time()
    for _ in range(n):
        q, v, _c = sf.step(reduced, q, v, 1 / 240)
    row["free_step_ms"] = 1e3 * (time.process_time() - t6) / n
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", type=int, default=20)
    ap.add_argument("--thickness-mm", type=float, default=1e3 * sf.THICKNESS, help="tissue layer thickness")
    ap.add_argument("--poisson", type=float, default=sf.POISSON, help="tissue Poisson ratio")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    rows = []
    with threadpool_limits(1):
        for name, head, samples, radius in heads(a.modes):
            print(f"measuring {name} ...", file=sys.stderr, flush=True)
            rows.append(measure(name, head, samples, radius, a.modes, a.thickness_mm * 1e-3, a.poisson))
    if a.json:
        print(json.dumps(rows))
        return
    print(f"{a.modes} modes, tissue {a.thickness_mm:g} mm, Poisson ratio {a.poisson:g}, "
          f"Young's modulus {sf.YOUNG:g} Pa")
    for r in rows:
        print(f"{r['head']}: {r['vertices']} vertices, {r['tets']} tetrahedra, {r['dofs']} DOFs, "
              f"force support {r['support_vertices']} vertices")
        print(f"  build {r['build_s']:.2f} s CPU (layer {r['layer_s']:.2f} s); modal analysis {r['modal_s']:.2f} s")
        print(f"  step {r['step_ms']:.3f} ms with a fingertip pressed ({r['steps_per_s']:.0f} steps/s), "
              f"{r['free_step_ms']:.3f} ms free; press 2 mm: dent {r['press_peak_mm']:.2f} mm, "
              f"penetration {r['press_penetration_mm']:.3f} mm")
        for spot, s in r["spots"].items():
            print(f"  1 N on {spot:8s} peak / beyond 4 cm:  force-dual {s['force_dual']['peak_mm']:.3f} mm "
                  f"{s['force_dual']['far_pct']:5.2f} %   modal {s['modal']['peak_mm']:.3f} mm "
                  f"{s['modal']['far_pct']:6.2f} %   full {s['full']['peak_mm']:.3f} mm {s['full']['far_pct']:5.2f} %")


if __name__ == "__main__":
    results.run(main)
