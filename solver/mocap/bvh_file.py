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

from ..core import kinematics, quat, skeleton


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
        self.end_sites = []     # (joint index, (3,) offset) per End Site
        self.frame_time = 0.0
        self.header_frames = 0
        self.motion = None      # (rows, channels) float32
        self.warnings = []
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


FPS_RANGE = (1.0, 1000.0)       # frames per second a motion file may declare
ROTATION_LIMIT_DEG = 1.0e5      # |angle| beyond this (≈ 278 turns) is no real rotation key
FLOAT32_MAX = float(np.finfo(np.float32).max)  # Blender stores keys as 32-bit floats


def read(path, progress=None) -> BvhData:
    """Parse and validate a BVH file; raise BvhError(one line naming the file).

    The MOTION section is streamed in chunks of rows, each checked as it is read and
    kept as 32-bit floats, the precision Blender stores keys in (memory ≈ the (rows,
    channels) float32 array, half the file's size, not the file's text split into
    words). Refused: malformed
    hierarchies (see _parse_hierarchy), a frame rate outside FPS_RANGE, rows of the
    wrong length, values that are not finite or do not fit a 32-bit float, rotation
    angles beyond ±ROTATION_LIMIT_DEG degrees. progress(fraction) is called after each
    chunk when given (fraction of the file's bytes read, 0–1)."""
    name = os.path.basename(path)

    def fail(reason):
        raise BvhError(f"{name}: {reason}")

    try:
        f = open(path, encoding="utf-8", errors="replace", newline=None)  # \n, \r\n or \r
    except OSError as ex:
        fail(f"cannot read the file ({ex.strerror or ex})")
    with f:
        size = max(os.fstat(f.fileno()).st_size, 1)
        head_lines = []
        while True:
            line = f.readline()
            if not line:
                break
            if "\0" in line:
                fail("not a BVH motion file (binary data)")
            if line.strip().upper() == "MOTION":
                break
            head_lines.append(line)
            if len(head_lines) > 200000:
                fail("not a BVH motion file (no MOTION section in its first 200000 lines)")
        head = "".join(head_lines)
        tokens = head.split()
        if not tokens and not line:
            fail("the file is empty")
        if not tokens or tokens[0].upper() != "HIERARCHY":
            fail("not a BVH motion file (it does not start with HIERARCHY)")
        data = BvhData()
        _parse_hierarchy(tokens, data, fail)
        if not line:
            fail("truncated: the file ends before its MOTION section")

        def header_line():
            while True:
                ln = f.readline()
                if not ln:
                    fail("truncated: the MOTION section has no 'Frames:' and 'Frame Time:' lines")
                if ln.strip():
                    return ln

        def header(pattern, missing, convert, what):
            m = re.match(pattern, header_line(), re.I)
            if not m:
                fail(missing)
            try:
                return convert(m.group(1)), m.group(1)[:20]
            except ValueError:
                fail(f"the {what} '{m.group(1)[:20]}' is not a "
                     f"{'whole number' if convert is int else 'number'}")

        data.header_frames, _text = header(r"\s*Frames:\s*(\S+)\s*$", "the MOTION section "
                                           "does not start with 'Frames: <count>'", int, "frame count")
        data.frame_time, text = header(r"\s*Frame\s+Time:\s*(\S+)\s*$", "the MOTION section "
                                       "has no 'Frame Time: <seconds>' line", float, "frame time")
        lo, hi = FPS_RANGE
        if not math.isfinite(data.frame_time) or data.frame_time <= 0:
            fail(f"the frame time {text} is not a positive number of seconds")
        if not 1.0 / hi <= data.frame_time <= 1.0 / lo:
            fail(f"the frame time {text} s is {1.0 / data.frame_time:.4g} frames "
                 f"per second, outside {lo:g}–{hi:g} fps")
        expected = data.channel_count
        if expected == 0:
            fail("the hierarchy declares no channels, so there is no motion")
        chunks, n_rows, done = [], 0, f.tell()
        while True:
            lines = f.readlines(max(1 << 16, min(1 << 22, size // 20)))  # ≤ 5 % per chunk
            if not lines:
                break
            rows = [ln for ln in lines if ln.strip()]
            if not rows:
                continue
            if not n_rows:
                data.first_row = rows[0]
            values = _parse_rows(rows, n_rows, expected, fail)
            _check_values(values, data, fail, n_rows)
            chunks.append(values.astype(np.float32))
            del values
            n_rows += len(rows)
            done += sum(len(ln) for ln in lines)
            if progress:
                progress(min(done / size, 1.0))
    if not n_rows:
        fail("no frames: the MOTION section has no data rows")
    data.motion = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    del chunks
    if data.header_frames != n_rows:
        data.warnings.append(f"header says {data.header_frames} frames but the file has "
                             f"{n_rows} data rows; all {n_rows} rows were kept")
    return data


def _parse_rows(rows, first, expected, fail):
    """(len(rows), expected) float64 from byte lines; `first` is the index of rows[0]."""
    try:
        values = np.array(" ".join(rows).split(), dtype=np.float64)
    except ValueError:
        values = None
    if values is not None and values.size == len(rows) * expected:
        return values.reshape(len(rows), expected)
    for k, r in enumerate(rows):  # slow path: find the row and say what is wrong with it
        words = r.split()
        if len(words) != expected:
            fail(f"wrong channel count: frame {first + k + 1} has {len(words)} values but the "
                 f"hierarchy declares {expected} channels (a truncated or damaged row)")
        bad = next((w for w in words if not _is_float(w)), None)
        if bad is not None:
            fail(f"the motion data holds '{bad[:20]}', which is not a number (frame "
                 f"{first + k + 1})")
    fail("the motion data cannot be read as numbers")


def _check_values(motion, data, fail, first=0):
    """Refuse keys Blender cannot store or no real motion has (see read); motion holds
    the rows from frame index `first` on (float64, as parsed)."""
    bad = ~np.isfinite(motion) | (np.abs(motion) > FLOAT32_MAX)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        kind = "non-finite" if not np.isfinite(motion[r, c]) else "out-of-range"
        fail(f"{kind} value ({motion[r, c]:.4g}) in frame {first + r + 1}, channel {c + 1} "
             f"({_channel_label(data, c)}): keys must be finite 32-bit floats")
    rot = [data.first_channel[j] + i for j, chans in enumerate(data.channels)
           for i, ch in enumerate(chans) if ch in _ROT]
    if rot:
        big = np.abs(motion[:, rot]) > ROTATION_LIMIT_DEG
        if big.any():
            r, k = np.argwhere(big)[0]
            c = rot[k]
            fail(f"rotation {motion[r, c]:.4g}° in frame {first + r + 1} ({_channel_label(data, c)}) is "
                 f"beyond any plausible angle (±{ROTATION_LIMIT_DEG:g}°)")


def _channel_label(data, col):
    for j, chans in enumerate(data.channels):
        i = col - data.first_channel[j]
        if 0 <= i < len(chans):
            return f"{chans[i]} of joint '{data.names[j]}'"
    return "unknown channel"


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
    has_channels = []   # per joint: a CHANNELS line was seen
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
            has_channels.append(False)
            stack_push = len(data.names) - 1
            k = j
            if k >= n:
                fail("truncated hierarchy")
            stack.append(stack_push)
            k += 1
            continue
        if tl == "end":
            if k + 1 < n and tokens[k + 1].lower() == "site":
                if not stack or stack[-1] is None:
                    fail("an End Site outside a joint")
                k += 2
                while k < n and tokens[k] != "{":
                    k += 1
                data.end_sites.append([stack[-1], (0.0, 0.0, 0.0)])
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
            if not all(math.isfinite(x) and abs(x) <= FLOAT32_MAX for x in v):
                fail("non-finite or out-of-range value in an OFFSET of the hierarchy")
            if stack and stack[-1] is not None:
                offsets[stack[-1]] = v
            elif stack and data.end_sites:
                data.end_sites[-1][1] = v
            k += 4
            continue
        if tl == "channels":
            if not stack or stack[-1] is None:
                fail("CHANNELS outside a joint")
            joint = data.names[stack[-1]]
            try:
                count = int(tokens[k + 1])
            except (IndexError, ValueError):
                fail(f"the CHANNELS line of joint '{joint}' has no channel count")
            if not 0 <= count <= 6:
                fail(f"joint '{joint}' declares {count} channels (0 to 6 allowed)")
            if has_channels[stack[-1]]:
                fail(f"joint '{joint}' has two CHANNELS lines")
            names = [c.lower() for c in tokens[k + 2:k + 2 + count]]
            if len(names) < count:
                fail("truncated hierarchy (a CHANNELS line is cut short)")
            for c in names:
                if c not in _ROT and c not in _POS:
                    fail(f"unknown channel '{c}' in joint '{joint}'")
            twice = sorted({c for c in names if names.count(c) > 1})
            if twice:
                fail(f"joint '{joint}' repeats the channel {twice[0]} (each axis once)")
            data.channels[stack[-1]] = names
            has_channels[stack[-1]] = True
            channel += count
            k += 2 + count
            continue
        if t == "}":
            if not stack:
                fail("unbalanced '}' in the hierarchy")
            if stack[-1] is not None and not has_channels[stack[-1]]:
                fail(f"joint '{data.names[stack[-1]]}' has no CHANNELS line")
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
        letters = [_ROT[c] for c, _col in rot]   # distinct: read() refuses repeats
        angles = np.zeros((len(m), 3))
        for (c, col), letter in zip(rot, letters):
            angles[:, "XYZ".index(letter)] = np.radians(m[:, col], dtype=np.float64)
        out[:, j] = quat.from_euler(angles, "".join(reversed(letters)))
    return out


def joint_positions(data, rows=None):
    """World joint positions (frames, J, 3) in file units and axes (position channels
    replace the OFFSET, as Blender's importer reads them)."""
    return joint_matrices(data, rows)[..., :3, 3]


def joint_matrices(data, rows=None):
    """World joint transforms (frames, J, 4, 4), translations in file units and axes:
    kinematics.chain of each joint's local transform (its rotation channels, at its
    offset, or at its position channels where it has them)."""
    m = data.motion if rows is None else data.motion[rows]
    F, J = len(m), len(data.names)
    offsets = np.broadcast_to(np.asarray(data.offsets, dtype=float), (F, J, 3)).copy()
    for j, chans in enumerate(data.channels):
        for i, c in enumerate(chans):
            if c in _POS:
                offsets[:, j, _POS[c]] = m[:, data.first_channel[j] + i]
    local = kinematics.transforms(quat.to_matrix(local_rotations(data, rows)), offsets)
    return kinematics.chain(data.parents, None, local, relative=np.broadcast_to(np.eye(4), (J, 4, 4)))


def skeleton_text(data):
    """BVH text of the file's skeleton with only its first frame, for Blender's importer to
    build the armature in its rest pose without keying every frame.

    Written from the parsed hierarchy in the line layout that importer reads (one
    statement per line, channel names as it spells them), so it never sees the file's own
    layout. A joint with one or two rotation channels gets the missing axes (value 0):
    that importer needs all three to name an Euler order; the rest pose (offsets, end
    sites, which joints have positions) is unchanged, and the keys are written from the
    file's own channels (see joint_channels)."""
    lines = ["HIERARCHY"]
    values = data.first_row.split()
    row = []
    children = {}
    for j, p in enumerate(data.parents):
        children.setdefault(p, []).append(j)
    ends = {}
    for j, off in data.end_sites:
        ends.setdefault(j, []).append(off)
    spell = {**{k: f"{v}rotation" for k, v in _ROT.items()},
             **{k: f"{'XYZ'[v]}position" for k, v in _POS.items()}}

    def emit(j, depth):
        ind = "\t" * depth
        lines.append(f"{ind}{'ROOT' if data.parents[j] < 0 else 'JOINT'} {data.names[j]}")
        lines.append(f"{ind}{{")
        lines.append(f"{ind}\tOFFSET " + " ".join(repr(float(v)) for v in data.offsets[j]))
        chans = list(data.channels[j])
        vals = values[data.first_channel[j]:data.first_channel[j] + len(chans)]
        rot = [c for c in chans if c in _ROT]
        if rot:
            for c in ("xrotation", "yrotation", "zrotation"):
                if c not in rot:
                    chans.append(c)
                    vals.append("0")
        row.extend(vals)
        lines.append(f"{ind}\tCHANNELS {len(chans)} " + " ".join(spell[c] for c in chans))
        for c in children.get(j, []):
            emit(c, depth + 1)
        for off in ends.get(j, []):
            lines.extend([f"{ind}\tEnd Site", f"{ind}\t{{",
                          f"{ind}\t\tOFFSET " + " ".join(repr(float(v)) for v in off), f"{ind}\t}}"])
        lines.append(f"{ind}}}")

    for root in children.get(-1, []):
        emit(root, 0)
    lines += ["MOTION", "Frames: 1", f"Frame Time: {data.frame_time!r}", " ".join(row)]
    return "\n".join(lines) + "\n"


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


_AXIS_NAMES = ("X", "Y", "Z")
# Candidate file units (metres per unit), tried in order when the height is out of range.
UNIT_CANDIDATES = (1.0, 0.01, 0.1, 0.0254, 0.001, 0.056444)
HEIGHT_RANGE = (1.2, 2.2)
TARGET_HEIGHT = 1.7


UNIT_NAMES = {1.0: "metres", 0.01: "centimetres", 0.1: "decimetres", 0.0254: "inches",
              0.001: "millimetres", 0.056444: "CMU units (0.056444 m)"}


def rest_positions(data):
    """Joint positions (J, 3) of the hierarchy's OFFSETs alone, in file units and axes."""
    rest = np.zeros((len(data.names), 3))
    for j, p in enumerate(data.parents):
        rest[j] = data.offsets[j] + (rest[p] if p >= 0 else 0.0)
    return rest


def up_axis(names, parents, rest, poses):
    """(axis 0–2, sign ±1, note or None): the file axis nearest the body's up direction,
    read by solver.core.skeleton from the geometry of rest (J, 3) and poses (F, J, 3) — the head
    chain above the two legs — never from joint names. The note says when it is a guess
    (no humanoid found, or a body lying between two axes)."""
    try:
        an = skeleton.analyse(names, parents, rest, poses=poses)
        d, note = an.up, None
        if np.abs(d).max() < 0.9:
            note = (f"the body's up direction lies between the file axes "
                    f"({np.round(d, 2).tolist()}): taken as the nearest")
    except ValueError:
        # not a humanoid: the longest extent, with the root below its middle
        ext = poses.max(axis=1) - poses.min(axis=1)
        axis = int(np.argmax(np.median(ext, axis=0)))
        mid = (poses.max(axis=1) + poses.min(axis=1)) / 2
        d = np.zeros(3)
        d[axis] = np.median(mid[:, axis] - poses[:, 0, axis]) or 1.0
        note = "no head above two legs found: the up axis is a guess (the longest extent)"
    axis = int(np.argmax(np.abs(d)))
    return axis, (1.0 if d[axis] >= 0 else -1.0), note


def detect_orientation(data, samples=32):
    """(axis_up, axis_forward, scale, height_in_file_units, note) for Blender's importer.

    Up = the file axis nearest the body's up direction (up_axis) over up to `samples`
    frames spread through the clip (the rest pose can disagree with the motion).
    Height = the extent of the joints along that axis (median over the sampled frames);
    scale = the first common unit that puts it in 1.2–2.2 m, else the factor giving 1.7 m.
    A BVH file declares no unit: any unit but metres is reported in the note, as is an up
    axis that is a guess (notes joined by '; ', None when there is nothing to say).
    """
    rows = np.unique(np.linspace(0, data.rows - 1, min(samples, data.rows)).astype(int))
    pos = joint_positions(data, rows)
    axis, sign, up_note = up_axis(data.names, data.parents, rest_positions(data), pos)
    up = ("-" if sign < 0 else "") + _AXIS_NAMES[axis]
    # A forward axis different from up: keep Blender's defaults where they apply.
    forward = {"Y": "-Z", "-Y": "Z", "Z": "Y", "-Z": "-Y", "X": "-Z", "-X": "-Z"}[up]
    heights = pos[..., axis].max(axis=1) - pos[..., axis].min(axis=1)
    height = float(np.median(heights))
    notes = [up_note] if up_note else []
    if not math.isfinite(height) or height <= 1e-9:
        return up, forward, 1.0, height, "; ".join(notes + ["the skeleton has no height; its size was kept"])
    for unit in UNIT_CANDIDATES:
        if HEIGHT_RANGE[0] <= height * unit <= HEIGHT_RANGE[1]:
            scale = unit
            if unit != 1.0:
                notes.append(f"units taken as {UNIT_NAMES[unit]} (the skeleton is {height:.4g} "
                             f"units tall): scaled by {unit:g} to metres")
            break
    else:
        scale = TARGET_HEIGHT / height
        notes.append(f"skeleton height {height:.4g} units matches no common unit; "
                     f"scaled to {TARGET_HEIGHT} m")
    return up, forward, scale, height, "; ".join(notes) or None
