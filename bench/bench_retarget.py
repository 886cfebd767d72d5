"""Every clip in ../shared/data onto every test character, judged by what a viewer sees
(issue 36's Done-when), each target measured in its own facing frame on Blender's
evaluated bones (tests/helpers/retarget_measure.py, shared with the retarget tests).

    .venv/bin/python bench/bench_retarget.py [--clips PATTERN] [--rigs signer,godot,…] [--frames N]

Clips: every BVH, FBX and glTF/GLB under ../shared/data/mocap and ../shared/data/generated
(--clips: a glob on the path below ../shared/data, e.g. 'generated/*'); rigs: the bundled
signer, the CC0 base mesh (godot), the robot, and the base mesh built in Blender as other
tools give a character (retarget_rigs.VARIANTS, as the retarget tests build them): every
bone renamed Node_<n> (godot_nodes), in centimetres under an object scale of 0.01
(godot_cm), a 3ds Max Biped with its clavicles on the neck (max_biped), turned to face +X
(godot_plus_x); --frames: the first N frames of each clip (default 300; 0 for every
frame). Per pair it prints:

  yaw    largest difference (deg) of the hip–shoulder yaw from the source's      ≤ 30
  side   bone-map pairs whose names say different sides                           0
  twist  largest spine/neck/head twist (deg) beyond the source bone's             ≤ 45
  foot   fraction of frames whose foot pitch follows the source's within 20°      ≥ 0.95
  root   largest hip-joint error (cm) in the target's facing frame                ≤ 2
  cos    smallest chain direction cosine (spine, neck after rest alignment)       ≥ 0.98
  step   largest one-frame world turn (deg) of a bone beyond the source's         ≤ 20
  and "refused: …" (the product's one-line refusal) or "crashed: …".

Exits non-zero when any pair fails a threshold, is refused or crashes.
"""
import argparse
import fnmatch
import pathlib
import sys
import traceback

import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
sys.path.insert(0, str(ROOT))
import devenv  # noqa: E402

TMP = devenv.isolate_user_resources("signsim-bench-")
import bpy  # noqa: E402

ADDON = devenv.enable_from_source(TMP)
import retarget_measure as rm  # noqa: E402
import retarget_rigs  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
RIGS = ("signer", "godot", "robot") + tuple(retarget_rigs.VARIANTS)
SUFFIXES = (".bvh", ".fbx", ".glb", ".gltf")
LIMITS = {"yaw": 30.0, "twist": 45.0, "foot": 0.95, "root": 2.0, "cos": 0.98, "step": 20.0}


def clips(pattern):
    found = sorted(str(p.relative_to(DATA)) for d in ("mocap", "generated") if (DATA / d).is_dir()
                   for p in (DATA / d).iterdir() if p.suffix.lower() in SUFFIXES)
    return [c for c in found if fnmatch.fnmatch(c, pattern)]


def measure(clip, rig, frames):
    """One pair's row: {name: value} (see the module's docstring) or {"refused"|"crashed": why}."""
    rt = ADDON.signsim_addon.retarget.api
    bpy.ops.wm.read_homefile(use_empty=True)
    target = retarget_rigs.target_rig(DATA, rig)
    try:
        src, tgt, result, fps = rm.retarget_clip(rt, DATA / clip, target, frames)
    except ADDON.signsim_addon.errors.SignSimError as ex:
        return {"refused": str(ex)}
    except Exception as ex:   # noqa: BLE001 — a crash is a result of the bench
        traceback.print_exc()
        return {"crashed": f"{type(ex).__name__}: {ex}"}
    pairs = result.bone_map.as_dict()
    cos = rm.chain_cosines(src, tgt)
    step = rm.jump_excess(src, tgt, pairs, rm.rhythm_girdles(src, tgt, pairs))
    twist = rm.twist_excess(src, tgt, pairs)
    return {"yaw": rm.yaw_error(src, tgt), "side": len(rm.sides_named_crossed(pairs)),
            "twist": twist["twist_excess_deg"], "twist_worst": twist["twist_worst"],
            "foot": rm.foot_pitch_within(src, tgt), "root": 100.0 * rm.root_error(src, tgt, fps),
            "cos": min(cos.values()), "cos_worst": "/".join(map(str, min(cos, key=cos.get))),
            "step": step["jump_excess_deg"], "step_worst": step["jump_worst"]}


def judge(clip, rig, m):
    """Check one row against LIMITS (results.check); returns the failed names."""
    name = f"{clip} → {rig}"
    if "refused" in m or "crashed" in m:
        results.check(f"{name}: not refused nor crashed ({m.get('refused') or m.get('crashed')})", False)
        return ["refused" if "refused" in m else "crashed"]
    failed = []
    for key, ok in (("yaw", m["yaw"] <= LIMITS["yaw"]), ("side", m["side"] == 0),
                    ("twist", m["twist"] <= LIMITS["twist"]),
                    ("foot", m["foot"] is None or m["foot"] >= LIMITS["foot"]),
                    ("root", m["root"] <= LIMITS["root"]), ("cos", m["cos"] >= LIMITS["cos"]),
                    ("step", m["step"] <= LIMITS["step"])):
        if not ok:
            failed.append(key)
    results.check(f"{name}: every threshold (failed: {', '.join(failed)})", not failed)
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clips", default="*", help="glob on the clip's path below ../shared/data (default: all)")
    ap.add_argument("--rigs", default=",".join(RIGS), help=f"comma-separated, of {', '.join(RIGS)}")
    ap.add_argument("--frames", type=int, default=300, help="first N frames of each clip (0: all; default 300)")
    args = ap.parse_args()
    rigs = [r.strip() for r in args.rigs.split(",") if r.strip()]
    if not DATA.is_dir():
        sys.exit(f"no shared data at {DATA}")
    unknown = [r for r in rigs if r not in RIGS]
    if unknown:
        sys.exit(f"unknown rig(s): {', '.join(unknown)} (known: {', '.join(RIGS)})")
    chosen = clips(args.clips)
    if not chosen:
        sys.exit(f"no clip under {DATA} matches {args.clips!r}")
    print(f"{'clip':<44} {'rig':<12} {'yaw°':>6} {'side':>4} {'twist°':>7} {'foot':>5} {'root cm':>7} "
          f"{'cos':>6} {'step°':>6}  failed")
    for clip in chosen:
        for rig in rigs:
            m = measure(clip, rig, args.frames or None)
            failed = judge(clip, rig, m)
            if "refused" in m or "crashed" in m:
                print(f"{clip:<44} {rig:<12} {next(iter(m))}: {next(iter(m.values()))}", flush=True)
                continue
            foot = "-" if m["foot"] is None else f"{m['foot']:.2f}"
            worst = {"twist": m["twist_worst"], "cos": m["cos_worst"], "step": m["step_worst"]}
            note = ", ".join(f"{k} ({worst[k]})" if k in worst else k for k in failed)
            print(f"{clip:<44} {rig:<12} {m['yaw']:6.1f} {m['side']:4d} {m['twist']:7.1f} {foot:>5} "
                  f"{m['root']:7.2f} {m['cos']:6.3f} {m['step']:6.1f}  {note}", flush=True)


if __name__ == "__main__":
    results.run(main)
