"""Tiny motion files written by the library tests (never third-party data).

`bvh_text(rows, ...)` writes a 12-joint human in centimetres, Y up, standing 1.65 m tall;
each row is a dict {joint: (rz, rx, ry)} of rotations in degrees (root also 'pos').
"""
import math


# name, parent, offset (cm, Y up), rotation channel order, end site
JOINTS = (
    ("Hips", None, (0, 0, 0), "ZXY", None),
    ("Spine", "Hips", (0, 10, 0), "ZYX", None),
    ("Neck", "Spine", (0, 40, 0), "ZXY", None),
    ("Head", "Neck", (0, 10, 0), "ZXY", (0, 15, 0)),
    ("LeftArm", "Spine", (15, 35, 0), "ZXY", None),
    ("LeftHand", "LeftArm", (30, 0, 0), "ZXY", (10, 0, 0)),
    ("RightArm", "Spine", (-15, 35, 0), "ZXY", None),
    ("RightHand", "RightArm", (-30, 0, 0), "ZXY", (-10, 0, 0)),
    ("LeftUpLeg", "Hips", (10, 0, 0), "ZXY", None),
    ("LeftFoot", "LeftUpLeg", (0, -90, 0), "ZXY", (0, 0, 10)),
    ("RightUpLeg", "Hips", (-10, 0, 0), "ZXY", None),
    ("RightFoot", "RightUpLeg", (0, -90, 0), "ZXY", (0, 0, 10)),
)
HIP_HEIGHT = 95.0
HEIGHT_CM = 165.0


def _axes(v, up):
    x, y, z = v
    return (x, -z, y) if up == "Z" else (x, y, z)


def bvh_text(rows, frame_time=1 / 30, header_frames=None, up="Y", unit=1.0):
    """BVH text of JOINTS with the given rows (see module doc). unit scales lengths."""
    out = ["HIERARCHY"]
    children = {}
    for j in JOINTS:
        children.setdefault(j[1], []).append(j)

    def emit(j, depth):
        name, parent, off, order, end = j
        ind = "  " * depth
        out.append(f"{ind}{'ROOT' if parent is None else 'JOINT'} {name}")
        out.append(f"{ind}{{")
        o = [c * unit for c in _axes(off, up)]
        out.append(f"{ind}  OFFSET {o[0]:.6f} {o[1]:.6f} {o[2]:.6f}")
        ch = [f"{a}rotation" for a in order]
        if parent is None:
            ch = ["Xposition", "Yposition", "Zposition"] + ch
        out.append(f"{ind}  CHANNELS {len(ch)} {' '.join(ch)}")
        for c in children.get(name, []):
            emit(c, depth + 1)
        if end:
            e = [c * unit for c in _axes(end, up)]
            out.append(f"{ind}  End Site")
            out.append(f"{ind}  {{")
            out.append(f"{ind}    OFFSET {e[0]:.6f} {e[1]:.6f} {e[2]:.6f}")
            out.append(f"{ind}  }}")
        out.append(f"{ind}}}")

    emit(JOINTS[0], 0)
    out.append("MOTION")
    out.append(f"Frames: {len(rows) if header_frames is None else header_frames}")
    out.append(f"Frame Time: {frame_time:.7f}")
    for row in rows:
        vals = []
        for name, parent, off, order, end in JOINTS:
            if parent is None:
                pos = row.get("pos", (0, HIP_HEIGHT, 0))
                vals += [c * unit for c in _axes(pos, up)]
            rot = row.get(name, (0, 0, 0))  # given as (x, y, z) degrees
            rot = dict(zip("XYZ", rot))
            vals += [rot[a] for a in order]
        out.append(" ".join(f"{v:.6f}" for v in vals))
    return "\n".join(out) + "\n"


def still_rows(n, **joints):
    """n rows with a gentle idle motion (so the clip is not constant)."""
    rows = []
    for t in range(n):
        row = {"Spine": (3 * math.sin(t / 5), 0, 0), "LeftArm": (0, 0, -60 + 5 * math.sin(t / 7))}
        row.update({k: v(t) if callable(v) else v for k, v in joints.items()})
        rows.append(row)
    return rows


def write(path, text):
    path.write_text(text)
    return path
