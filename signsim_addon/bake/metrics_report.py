"""The bake's metrics as a table (Metrics panel), CSV and JSON files, and the worst frame.

Pure functions over the metrics record of bake.metrics_record (Action.signsim.bake_metrics:
{"reference": {...}, "baked": {...}}) plus the frames of its per-frame lists, which are read
from the per-frame metric F-curves bake writes (bake.METRIC_CURVES).
"""
import csv
import io
import json
from dataclasses import dataclass

import numpy as np

from ..errors import SignSimError

# (key, label, unit, lower is better: True/False, or None for no verdict: tracking, lag and
# fallbacks are 0 for the reference by definition, so a comparison would say nothing)
SUMMARY = (
    ("tracking_rms_deg", "Tracking Error (RMS)", "°", None),
    ("lag_ms", "Lag", "ms", None),
    ("jerk_cost", "Jerk Cost", "m²/s⁵", True),
    ("penetration_max_mm", "Penetration Max", "mm", True),
    ("penetration_p95_mm", "Penetration 95th %", "mm", True),
    ("frames_penetrating", "Frames Penetrating", "frames", True),
    ("skin_penetration_max_mm", "Skin Penetration Max", "mm", True),
    ("skin_penetration_p95_mm", "Skin Penetration 95th %", "mm", True),
    ("skin_frames_penetrating", "Frames Skin Intersects", "frames", True),
    ("joint_limit_excess_deg", "Joint-Limit Excess", "°", True),
    ("substeps_mean", "Substeps per Frame", "", None),
    ("fallbacks", "Fallbacks", "", None),
    ("bake_seconds", "Bake Time", "s", None),
    ("realtime_factor", "Real-Time Factor", "×", None),
)
GROUP_KEY = "tracking_rms_deg_per_group"
# per-frame lists: (side, key, label, unit)
PER_FRAME = (("reference", "per_frame_penetration_mm", "Penetration", "mm"),
             ("baked", "per_frame_penetration_mm", "Penetration", "mm"),
             ("baked", "per_frame_tracking_deg", "Tracking Error", "°"),
             ("reference", "per_frame_skin_penetration_mm", "Skin Penetration", "mm"),
             ("baked", "per_frame_skin_penetration_mm", "Skin Penetration", "mm"))
_TOL = 1e-9


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    unit: str
    before: float
    after: float
    verdict: str  # 'BETTER', 'WORSE', 'SAME' or '' (no verdict)

    def text(self, value):
        """A value formatted for the panel, with its unit."""
        return f"{_fmt(value)} {self.unit}".strip()


def parse(text) -> dict:
    """The metrics record from Action.signsim.bake_metrics; raises SignSimError."""
    if not text:
        raise SignSimError("this action has no bake metrics: bake it first")
    try:
        m = json.loads(text)
    except ValueError as ex:
        raise SignSimError(f"the bake metrics are not valid JSON ({ex})") from None
    if not isinstance(m, dict) or not {"reference", "baked"} <= set(m):
        raise SignSimError("the bake metrics lack the 'reference' and 'baked' sides")
    return m


def verdict(before, after, lower_is_better):
    if lower_is_better is None or before is None or after is None:
        return ''
    # the reference tracks itself (0 error, 0 lag): compare magnitudes
    b, a = abs(before), abs(after)
    if abs(a - b) <= _TOL * max(1.0, b):
        return 'SAME'
    return 'BETTER' if (a < b) == lower_is_better else 'WORSE'


def table_rows(metrics) -> list:
    """Before/after rows of the summary metrics present in the record."""
    ref, baked = metrics.get("reference", {}), metrics.get("baked", {})
    rows = []
    for key, label, unit, lower in SUMMARY:
        if key not in baked:
            continue
        before, after = ref.get(key), baked[key]
        rows.append(Row(key, label, unit, before, after, verdict(before, after, lower)))
    return rows


def group_rows(metrics) -> list:
    """[(group, tracking RMS in degrees)] in the record's order."""
    return list(metrics.get("baked", {}).get(GROUP_KEY, {}).items())


def target_rows(metrics) -> list:
    """[(label, text)] of the projection (the record's "target" block: how far the target
    is from the reference where contacts moved it), or [] for a bake without one."""
    t = metrics.get("target")
    if not t:
        return []
    where = (f" · {t['largest_change_bone']} · frame {t['largest_change_frame']:.0f}"
             if t.get("largest_change_bone") else "")
    return [("Projected Frames", f"{t['projected_frames']} ({t['colliding_frames']} colliding)"),
            ("Largest Change", f"{t['largest_change_deg']:.1f}°{where}"),
            ("Mean Change", f"{t['mean_change_deg']:.1f}°"),
            ("Projection Time", f"{t['projection_seconds']:.2f} s · "
                                f"{1e3 * t['seconds_per_colliding_frame']:.0f} ms per colliding frame")]


def per_frame(metrics, frames=None) -> dict:
    """{(side, key): (frames (F,), values (F,))} of the per-frame lists.

    frames: the scene frames of the lists (default: 1, 2, …). Raises SignSimError when
    the lengths disagree.
    """
    out = {}
    for side, key, _label, _unit in PER_FRAME:
        values = metrics.get(side, {}).get(key)
        if values is None:
            continue
        values = np.asarray(values, dtype=float)
        f = np.arange(1, len(values) + 1, dtype=float) if frames is None else np.asarray(frames, float)
        if len(f) != len(values):
            raise SignSimError(f"{len(values)} per-frame values of {side} {key} for {len(f)} frames")
        out[(side, key)] = (f, values)
    return out


def worst_frame(metrics, frames=None):
    """(frame, depth in mm) of the largest per-frame penetration after the bake, or None."""
    series = per_frame(metrics, frames).get(("baked", "per_frame_penetration_mm"))
    if series is None or not len(series[1]):
        return None
    f, v = series
    i = int(np.argmax(v))
    return float(f[i]), float(v[i])


def to_csv(metrics, frames=None) -> str:
    """Long-format CSV: metric, unit, group, frame, reference, baked.

    Summary rows leave group and frame empty; per-group tracking rows fill group;
    per-frame rows fill frame (and reference or baked only, for one-sided lists).
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["metric", "unit", "group", "frame", "reference", "baked"])
    for r in table_rows(metrics):
        w.writerow([r.key, r.unit, "", "", _csv(r.before), _csv(r.after)])
    for group, value in group_rows(metrics):
        w.writerow(["tracking_rms_deg", "°", group, "", "", _csv(value)])
    series = per_frame(metrics, frames)
    for key, unit in (("per_frame_penetration_mm", "mm"), ("per_frame_tracking_deg", "°"),
                      ("per_frame_skin_penetration_mm", "mm")):
        ref, baked = series.get(("reference", key)), series.get(("baked", key))
        base = baked or ref
        if base is None:
            continue
        for i, f in enumerate(base[0]):
            w.writerow([key, unit, "", _csv(f), _csv(ref[1][i]) if ref else "",
                        _csv(baked[1][i]) if baked else ""])
    return buf.getvalue()


def read_csv(text) -> dict:
    """Back from to_csv: {"reference": {...}, "baked": {...}} with per-group and per-frame
    lists rebuilt, and "frames" (the per-frame frames). For tests and round trips."""
    out = {"reference": {}, "baked": {}, "frames": []}
    for row in csv.DictReader(io.StringIO(text)):
        key = row["metric"]
        if row["frame"]:
            if key == "per_frame_penetration_mm":
                out["frames"].append(float(row["frame"]))
            for side in ("reference", "baked"):
                if row[side] != "":
                    out[side].setdefault(key, []).append(float(row[side]))
        elif row["group"]:
            out["baked"].setdefault("tracking_rms_deg_per_group", {})[row["group"]] = float(row["baked"])
        else:
            for side in ("reference", "baked"):
                if row[side] != "":
                    out[side][key] = float(row[side])
    return out


def to_json(metrics, frames=None, action=None, reference=None, settings=None) -> str:
    """The full record (per-frame lists included) with the frames and provenance."""
    series = per_frame(metrics, frames)
    f = next(iter(series.values()))[0].tolist() if series else []
    doc = {"action": action, "reference_action": reference, "frames": f,
           "settings": settings, "metrics": metrics}
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False)


def _fmt(value):
    if value is None:
        return "–"
    if isinstance(value, int):
        return f"{int(value)}"
    a = abs(value)
    if a >= 1e5:
        return f"{value:.3g}"
    return f"{value:.3f}" if a < 10 else f"{value:.1f}"


def _csv(value):
    return "" if value is None else repr(float(value)) if not isinstance(value, int) else str(value)


# --- Blender side: which action holds the metrics, at which frames -----------------------

def metrics_action(ob):
    """The baked action whose metrics the panel shows for armature `ob`, or None: the
    assigned action if it has metrics, else the bake of the assigned reference (or the
    NLA physics track's)."""
    if ob is None or ob.type != 'ARMATURE' or ob.animation_data is None:
        return None
    from . import preview
    ad = ob.animation_data
    if ad.action is not None and ad.action.signsim.bake_metrics:
        return ad.action
    pair = preview.baked_pair(ob)
    if pair and pair[1] is not None and pair[1].signsim.bake_metrics:
        return pair[1]
    return None


def metric_frames(action, n):
    """The scene frames of the per-frame lists of `action` (length n): the keys of its
    per-frame metric F-curve, else n frames from the action's first frame."""
    from . import job as bake
    from .. import keys
    for slot in action.slots:
        bag = keys.channelbag(action, slot)
        fc = bag.fcurves.find(f'["{bake.METRIC_CURVES[0][0]}"]') if bag else None
        if fc is not None and len(fc.keyframe_points) == n:
            co = np.empty(2 * n)
            fc.keyframe_points.foreach_get("co", co)
            return co[0::2]
    start = float(action.frame_range[0])
    return np.arange(start, start + n)


def action_report(action):
    """(metrics, frames) of a baked action; raises SignSimError without metrics."""
    m = parse(action.signsim.bake_metrics)
    n = len(m.get("baked", {}).get("per_frame_penetration_mm", ()))
    return m, metric_frames(action, n) if n else None


def graph_editor(screen):
    """(area, window region) of the first Graph Editor of `screen`, or None."""
    for area in (screen.areas if screen else ()):
        if area.type == 'GRAPH_EDITOR':
            region = next((r for r in area.regions if r.type == 'WINDOW'), None)
            if region is not None:
                return area, region
    return None


def show_curves(context, ob):
    """Show only the per-frame metric curves of `ob` in the screen's Graph Editor and frame
    them; returns the number of curves shown. Raises SignSimError without a Graph Editor."""
    import bpy

    from . import job as bake
    found = graph_editor(context.screen)
    if found is None:
        raise SignSimError("open a Graph Editor to plot the per-frame metrics")
    area, region = found
    space = area.spaces.active
    space.dopesheet.show_only_selected = True
    space.dopesheet.filter_text = "signsim_"
    for other in context.view_layer.objects:
        other.select_set(other == ob)
    context.view_layer.objects.active = ob
    with context.temp_override(area=area, region=region):
        bpy.ops.graph.view_all()
    return sum(1 for prop, _s, _k in bake.METRIC_CURVES if prop in ob)
