"""BVH text: validation, header facts and a numpy forward-kinematics pass (no bpy).

Blender's BVH importer trusts its input (an IndexError on a short row, NaN keys, any text
file accepted up to its first check), so every file is read here first: the result either
raises one BvhError (a ValueError) naming the file, or gives the facts the importer hides — the data
row count (the importer keeps every row, whatever the header says), the true frame time,
the up axis and the unit scale that make the skeleton stand upright in metres.
"""
import math
import os
import re

import numpy as np

from . import quat


class BvhError(ValueError):
    """A BVH file that cannot be read: the message is one line naming the file."""

_ROT = {"xrotation": "X", "yrotation": "Y", "zrotation": "Z"}
_POS = {"xposition": 0, "yposition": 1, "zposition": 2}


class BvhData:
    """What a BVH file says. Arrays are in file units and the file's axes."""

    def __init__(self):
        self.names = []         # joint names in file order
        self.parents = []       # parent index or -1
        self.offsets = []       # (J, 3)
        self.channels = []      # per joint: list of channel names (lower case)
        self.first_channel = []  # per joint: index of its first channel in a data row
        self.frame_time = 0.0
        self.header_frames = 0
        self.motion = None      # (rows, channels)
        self.warnings = []
        self.hierarchy_text = ""  # the file up to MOTION (for a one-frame skeleton file)
        self.first_row = ""

    @property
    def rows(self):
        return 0 if self.motion is None else len(self.motion)

    @property
    def fps(self):
        return 1.0 / self.frame_time

    @property
    def channel_count(self):
        return sum(len(c) for c in self.channels)


def read(path) -> BvhData:
    """Parse and validate a BVH file; raise BvhError(one line naming the file)."""
    name = os.path.basename(path)

    def fail(reason):
        raise BvhError(f"{name}: {reason}")

    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as ex:
        fail(f"cannot read the file ({ex.strerror or ex})")
    if not raw.strip():
        fail("the file is empty")
    if b"\0" in raw[:4096]:
        fail("not a BVH motion file (binary data)")
    text = raw.decode("utf-8", errors="replace")
    parts = re.split(r"(?im)^[ \t]*MOTION[ \t]*\r?$", text, maxsplit=1)
    head = parts[0]
    tokens = head.split()
    if not tokens or tokens[0].upper() != "HIERARCHY":
        fail("not a BVH motion file (it does not start with HIERARCHY)")
    data = BvhData()
    _parse_hierarchy(tokens, data, fail)
    if len(parts) < 2:
        fail("truncated: the file ends before its MOTION section")
    lines = parts[1].splitlines()
    i = 0

    def next_line():
        nonlocal i
        while i < len(lines) and not lines[i].strip():
            i += 1
        if i >= len(lines):
            fail("truncated: the MOTION section has no 'Frames:' and 'Frame Time:' lines")
        line = lines[i]
        i += 1
        return line

    m = re.match(r"\s*Frames:\s*(\S+)\s*$", next_line(), re.I)
    if not m:
        fail("the MOTION section does not start with 'Frames: <count>'")
    try:
        data.header_frames = int(m.group(1))
    except ValueError:
        fail(f"the frame count '{m.group(1)}' is not a whole number")
    m = re.match(r"\s*Frame\s+Time:\s*(\S+)\s*$", next_line(), re.I)
    if not m:
        fail("the MOTION section has no 'Frame Time: <seconds>' line")
    try:
        data.frame_time = float(m.group(1))
    except ValueError:
        fail(f"the frame time '{m.group(1)}' is not a number")
    if not math.isfinite(data.frame_time) or data.frame_time <= 0:
        fail(f"the frame time {m.group(1)} is not a positive number of seconds")
    rows = [ln for ln in lines[i:] if ln.strip()]
    if not rows:
        fail("no frames: the MOTION section has no data rows")
    expected = data.channel_count
    if expected == 0:
        fail("the hierarchy declares no channels, so there is no motion")
    tokens = "\n".join(rows).split()
    motion = None
    if len(tokens) == len(rows) * expected:
        try:
            motion = np.array(tokens, dtype=np.float64).reshape(len(rows), expected)
        except ValueError:
            motion = None
    if motion is None:  # slow path: find the row and say what is wrong with it
        for k, r in enumerate(rows):
            c = len(r.split())
            if c != expected:
                if k == len(rows) - 1 and c < expected:
                    fail(f"truncated: the last frame (row {k + 1}) has {c} of {expected} values")
                fail(f"wrong channel count: frame {k + 1} has {c} values but the hierarchy "
                     f"declares {expected} channels")
        bad = next((t for t in tokens if not _is_float(t)), "?")
        fail(f"the motion data holds '{bad[:20]}', which is not a number")
    finite = np.isfinite(motion)
    if not finite.all():
        r, c = np.argwhere(~finite)[0]
        fail(f"non-finite value ({motion[r, c]}) in frame {r + 1}, channel {c + 1}")
    data.motion = motion
    data.hierarchy_text = head
    data.first_row = rows[0]
    if data.header_frames != len(rows):
        data.warnings.append(f"header says {data.header_frames} frames but the file has "
                             f"{len(rows)} data rows; all {len(rows)} rows were kept")
    return data


def _is_float(t):
    try:
        float(t)
        return True
    except ValueError:
        return False


def _parse_hierarchy(tokens, data, fail):
    stack = []          # joint index per open brace (None for End Site)
    k = 1
    n = len(tokens)
    channel = 0
    offsets = []
    expect_open = False
    while k < n:
        t = tokens[k]
        tl = t.lower()
        if tl in ("root", "joint"):
            if tl == "root" and stack:
                fail("a ROOT appears inside another joint")
            if k + 1 >= n:
                fail("truncated hierarchy")
            # names may contain spaces: everything up to the '{'
            j = k + 1
            while j < n and tokens[j] != "{":
                j += 1
            jname = "_".join(tokens[k + 1:j])
            if not jname:
                fail("a joint has no name")
            parent = next((s for s in reversed(stack) if s is not None), -1) if stack else -1
            if tl == "joint" and not stack:
                fail(f"joint '{jname}' is outside any ROOT")
            data.names.append(jname)
            data.parents.append(parent)
            data.channels.append([])
            data.first_channel.append(channel)
            offsets.append((0.0, 0.0, 0.0))
            stack_push = len(data.names) - 1
            k = j
            if k >= n:
                fail("truncated hierarchy")
            stack.append(stack_push)
            k += 1
            continue
        if tl == "end":
            if k + 1 < n and tokens[k + 1].lower() == "site":
                k += 2
                while k < n and tokens[k] != "{":
                    k += 1
                stack.append(None)
                k += 1
                continue
            fail("'End' without 'Site' in the hierarchy")
        if tl == "offset":
            vals = tokens[k + 1:k + 4]
            if len(vals) < 3:
                fail("truncated hierarchy (an OFFSET has fewer than 3 numbers)")
            try:
                v = tuple(float(x) for x in vals)
            except ValueError:
                fail(f"an OFFSET holds '{' '.join(vals)}', which are not 3 numbers")
            if not all(math.isfinite(x) for x in v):
                fail("non-finite value in an OFFSET of the hierarchy")
            if stack and stack[-1] is not None:
                offsets[stack[-1]] = v
            k += 4
            continue
        if tl == "channels":
            if not stack or stack[-1] is None:
                fail("CHANNELS outside a joint")
            try:
                count = int(tokens[k + 1])
            except (IndexError, ValueError):
                fail("a CHANNELS line has no channel count")
            names = [c.lower() for c in tokens[k + 2:k + 2 + count]]
            if len(names) < count:
                fail("truncated hierarchy (a CHANNELS line is cut short)")
            for c in names:
                if c not in _ROT and c not in _POS:
                    fail(f"unknown channel '{c}' in joint '{data.names[stack[-1]]}'")
            data.channels[stack[-1]] = names
            channel += count
            k += 2 + count
            continue
        if t == "}":
            if not stack:
                fail("unbalanced '}' in the hierarchy")
            stack.pop()
            k += 1
            continue
        if t == "{":
            k += 1
            continue
        fail(f"unexpected word '{t[:30]}' in the hierarchy")
    if stack:
        fail("truncated: the hierarchy is not closed before the MOTION section")
    if not data.names:
        fail("the hierarchy has no joints")
    data.offsets = np.array(offsets, dtype=np.float64)


def local_rotations(data, rows=None):
    """Per-joint local rotations (frames, J, 4) from the rotation channels (file order)."""
    m = data.motion if rows is None else data.motion[rows]
    out = np.zeros((len(m), len(data.names), 4))
    out[..., 0] = 1.0
    for j, chans in enumerate(data.channels):
        rot = [(c, data.first_channel[j] + i) for i, c in enumerate(chans) if c in _ROT]
        if not rot:
            continue
        # BVH: R = R_first · R_second · R_third (intrinsic), i.e. the third channel's axis
        # is applied first: Blender's Euler order is the channel order reversed
        letters = [_ROT[c] for c, _col in rot]
        if len(set(letters)) == len(letters):
            angles = np.zeros((len(m), 3))
            for (c, col), letter in zip(rot, letters):
                angles[:, "XYZ".index(letter)] = np.radians(m[:, col])
            out[:, j] = quat.from_euler(angles, "".join(reversed(letters)))
        else:  # an axis repeated (legal, rare): one channel at a time
            for (c, col), letter in zip(rot, letters):
                angles = np.zeros((len(m), 3))
                angles[:, "XYZ".index(letter)] = np.radians(m[:, col])
                out[:, j] = quat.mul(out[:, j], quat.from_euler(angles, letter))
    return out


def joint_positions(data, rows=None):
    """World joint positions (frames, J, 3) in file units and axes (position channels
    replace the OFFSET, as Blender's importer reads them)."""
    m = data.motion if rows is None else data.motion[rows]
    F, J = len(m), len(data.names)
    mats = quat.to_matrix(local_rotations(data, rows))
    world_r = np.zeros((F, J, 3, 3))
    world_p = np.zeros((F, J, 3))
    for j in range(J):
        local = np.broadcast_to(data.offsets[j], (F, 3)).copy()
        for i, c in enumerate(data.channels[j]):
            if c in _POS:
                local[:, _POS[c]] = m[:, data.first_channel[j] + i]
        p = data.parents[j]
        if p < 0:
            world_r[:, j] = mats[:, j]
            world_p[:, j] = local
        else:
            world_r[:, j] = world_r[:, p] @ mats[:, j]
            world_p[:, j] = world_p[:, p] + np.einsum("fij,fj->fi", world_r[:, p], local)
    return world_p


def skeleton_text(data):
    """BVH text with the file's hierarchy and only its first frame (for Blender's importer
    to build the armature in its rest pose without keying every frame)."""
    return (data.hierarchy_text.rstrip() + "\nMOTION\nFrames: 1\n"
            f"Frame Time: {data.frame_time!r}\n{data.first_row.strip()}\n")


def joint_channels(data, j):
    """(position columns [x, y, z] or None, rotation columns in file order, axes 'ZYX'…)."""
    pos = [None, None, None]
    rot_cols, rot_axes = [], ""
    for i, c in enumerate(data.channels[j]):
        col = data.first_channel[j] + i
        if c in _POS:
            pos[_POS[c]] = col
        else:
            rot_cols.append(col)
            rot_axes += _ROT[c]
    return (pos if any(p is not None for p in pos) else None), rot_cols, rot_axes


_HEAD = re.compile(r"head(?!.*(end|top|site|nub))", re.I)
_HIPS = re.compile(r"hip|pelvis", re.I)
_NECK = re.compile(r"neck", re.I)


def find_joint(names, pattern, prefer_short=True):
    hits = [i for i, n in enumerate(names) if pattern.search(n.split(":")[-1])]
    if not hits:
        return None
    return min(hits, key=lambda i: (len(names[i]), i)) if prefer_short else hits[0]


def head_and_hips(names, parents):
    """Indices (head, hips) by name, falling back to the neck and the first joint that
    has more than one child (the pelvis of every human hierarchy)."""
    head = find_joint(names, _HEAD)
    if head is None:
        head = find_joint(names, _NECK)
    hips = None
    hips_named = [i for i, n in enumerate(names)
                  if _HIPS.search(n.split(":")[-1]) and not re.search(r"(left|right|\.l|\.r|_l|_r)\b", n, re.I)]
    if hips_named:
        hips = min(hips_named)
    if hips is None:
        children = np.bincount([p for p in parents if p >= 0], minlength=len(names))
        multi = np.nonzero(children > 1)[0]
        hips = int(multi[0]) if len(multi) else 0
    return head, hips


_AXIS_NAMES = ("X", "Y", "Z")
# Candidate file units (metres per unit), tried in order when the height is out of range.
UNIT_CANDIDATES = (1.0, 0.01, 0.1, 0.0254, 0.001, 0.056444)
HEIGHT_RANGE = (1.2, 2.2)
TARGET_HEIGHT = 1.7


def detect_orientation(data, samples=32):
    """(axis_up, axis_forward, scale, height_in_file_units, note) for Blender's importer.

    Up = the file axis along which the head sits above the hips, averaged over up to
    `samples` frames spread through the clip (the rest pose can disagree with the motion).
    Height = the extent of the joints along that axis (median over the sampled frames);
    scale = the first common unit that puts it in 1.2–2.2 m, else the factor giving 1.7 m.
    """
    rows = np.unique(np.linspace(0, data.rows - 1, min(samples, data.rows)).astype(int))
    pos = joint_positions(data, rows)
    head, hips = head_and_hips(data.names, data.parents)
    if head is not None and head != hips:
        d = (pos[:, head] - pos[:, hips]).mean(axis=0)
    else:  # no head: the longest extent, with the root below the middle
        ext = pos.max(axis=1) - pos.min(axis=1)
        axis = int(np.argmax(np.median(ext, axis=0)))
        mid = (pos.max(axis=1) + pos.min(axis=1)) / 2
        d = np.zeros(3)
        d[axis] = np.median(mid[:, axis] - pos[:, 0, axis]) or 1.0
    axis = int(np.argmax(np.abs(d)))
    sign = 1.0 if d[axis] >= 0 else -1.0
    up = ("-" if sign < 0 else "") + _AXIS_NAMES[axis]
    # A forward axis different from up: keep Blender's defaults where they apply.
    forward = {"Y": "-Z", "-Y": "Z", "Z": "Y", "-Z": "-Y", "X": "-Z", "-X": "-Z"}[up]
    heights = pos[..., axis].max(axis=1) - pos[..., axis].min(axis=1)
    height = float(np.median(heights))
    note = None
    if not math.isfinite(height) or height <= 1e-9:
        return up, forward, 1.0, height, "the skeleton has no height; its size was kept"
    for unit in UNIT_CANDIDATES:
        if HEIGHT_RANGE[0] <= height * unit <= HEIGHT_RANGE[1]:
            scale = unit
            break
    else:
        scale = TARGET_HEIGHT / height
        note = (f"skeleton height {height:.4g} units matches no common unit; "
                f"scaled to {TARGET_HEIGHT} m")
    return up, forward, scale, height, note
