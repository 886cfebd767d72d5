"""Composition: splice clips with blend windows,
layer additive motion, and measure every seam. numpy only; arrays in, arrays out.

Data of one clip (a `Track`), all sampled at one common frame rate `fps` (frames/s):
  rotations  (F, B, 4)  local bone quaternions, w first. The bones listed in `floor_bones`
                        (the root bones) hold rotations in the floor frame (Z up) instead,
                        so that root alignment can turn them about Z.
  positions  (F, P, 3)  located channels, m. The channels in `floor_positions` are root
                        positions in the floor frame (aligned with the root), the others
                        are local offsets (blended, never aligned).
`root` is the index of the main root bone in B and `root_position` the index of its
position in P: they define the floor position and heading of a clip.

Splicing A then B over a window of W frames overlaps A's last W frames with B's first W:
  α_k = curve((k + 1) / (W + 1)),  k = 0 … W−1     (α never reaches 0 or 1 inside)
  q = slerp(q_A, q_B′, α_k) per bone (shortest arc), p = (1 − α_k) p_A + α_k p_B′ for
  local positions; root (floor) positions blend their steps instead (root velocity):
  p(k) = p(k−1) + (1 − α_k) Δp_A(k) + α_k Δp_B′(k), and B′ continues from p(W−1), so no
  root step is longer than the clips' own and the root never jumps
so the result has F_A + F_B − W frames; W = 0 is a hard cut. B′ is B aligned (root
alignment): its root path rotated about Z by the heading difference ψ and translated so
that B′ starts where A is at the first frame of the window (A's last step extrapolated
for a hard cut):
  p′ = R_z(ψ) (p − p_B(0)) + p_A(F_A − W),   q′_root = q_z(ψ) ⊗ q_root
ψ = heading(q_A,root(anchor)) − heading(q_B,root(0)), heading(q) = 2 atan2(q_z, q_w) the
world yaw of q = q_z(ψ) ⊗ q_s (q_s without a z component). With keep_height the vertical
coordinate stays B's own (feet stay on the floor), otherwise B starts at A's height too.

Curves α(s), s ∈ [0, 1]: linear s; smoothstep 3s² − 2s³ (C¹: α′ = 0 at both ends);
smootherstep 6s⁵ − 15s⁴ + 10s³ (C²).

Seam quality (seed 004 §5). The seed's velocity jump D = ‖v_A(t_end) − v_B(t_start)‖ is
measured on the composed motion as the largest change of joint angular velocity between
consecutive frame steps across the transition (metrics.splice_velocity_jump at every frame
from the one before the window to the one after it; rad/s, all bones stacked). For a hard
cut this is the jump at the cut; a blend spreads it over the window.

Default threshold ε (rad/s), per seam: a seam should not change the joints' velocity more
than the two clips it joins change it themselves from one frame to the next. ε = the 99th
percentile of the per-frame velocity change D(k) over every interior frame of the two
(trimmed) clips, the larger of the two: the 1 % cut ignores mocap spikes; the larger clip
keeps a calm clip from making every seam into a lively one fail. It is in the units of D
at the composition's frame rate, so it scales with it as D does. On the shared mocap
clips at 30 fps it is 3–26 rad/s, while hard cuts jump by 98–217 rad/s.
"""

import numpy as np

from . import quat
from .metrics import splice_velocity_jump

CURVES = ("linear", "smoothstep", "smootherstep")


class Track:
    """One clip's arrays (see the module docstring): rotations (F, B, 4), positions (F, P, 3)."""

    def __init__(self, rotations, positions=None):
        self.rotations = np.asarray(rotations, dtype=float)
        if self.rotations.ndim != 3 or self.rotations.shape[-1] != 4:
            raise ValueError("rotations must have shape (frames, bones, 4)")
        n = len(self.rotations)
        self.positions = np.zeros((n, 0, 3)) if positions is None else np.asarray(positions, dtype=float)
        if self.positions.ndim != 3 or len(self.positions) != n or self.positions.shape[-1] != 3:
            raise ValueError("positions must have shape (frames, channels, 3) like the rotations")

    def __len__(self):
        return len(self.rotations)

    def slice(self, start, stop):
        return Track(self.rotations[start:stop], self.positions[start:stop])


class Rig:
    """Which channels are in the floor frame: root (bone index), root_position (channel
    index), floor_bones (bone indices, the root included), floor_positions (channel indices,
    root_position included). keep_height: B keeps its own root height when aligned."""

    def __init__(self, root=0, root_position=0, floor_bones=None, floor_positions=None,
                 keep_height=False):
        self.root, self.root_position = int(root), int(root_position)
        self.floor_bones = np.asarray([root] if floor_bones is None else floor_bones, dtype=np.intp)
        self.floor_positions = np.asarray([root_position] if floor_positions is None else floor_positions,
                                          dtype=np.intp)
        self.keep_height = bool(keep_height)


# ------------------------------------------------------------------------------ weights

def curve(s, kind="smoothstep"):
    """Blend weight α(s) for s (...,) in [0, 1] (clipped): linear, smoothstep, smootherstep."""
    s = np.clip(np.asarray(s, dtype=float), 0.0, 1.0)
    if kind == "linear":
        return s
    if kind == "smoothstep":
        return s * s * (3.0 - 2.0 * s)
    if kind == "smootherstep":
        return s * s * s * (s * (6.0 * s - 15.0) + 10.0)
    raise ValueError(f"unknown blend curve '{kind}' (choose {', '.join(CURVES)})")


def blend_weights(window, kind="smoothstep"):
    """Weights α_k (window,) of B for the frames of a window: curve((k + 1) / (window + 1))."""
    window = int(window)
    if window < 0:
        raise ValueError("a blend window cannot be negative")
    return curve((np.arange(window) + 1.0) / (window + 1.0), kind)


# ---------------------------------------------------------------------------- alignment

def _twist_z(q):
    """Heading (rad) of floor-frame rotations q (..., 4): ψ in q = q_z(ψ) ⊗ q_s where q_s has
    no z component (world yaw of the swing-twist decomposition). Turning q about Z by φ
    (q_z(φ) ⊗ q) adds φ to it exactly."""
    return 2.0 * np.arctan2(q[..., 3], q[..., 0])


def _anchor(track, index, rig):
    """Root position (3,) and rotation (4,) of track at frame index; one past the end is
    extrapolated from the last step (position) and held (rotation)."""
    p = track.positions[:, rig.root_position]
    q = track.rotations[:, rig.root]
    if index < len(track):
        return p[index], q[index]
    last = len(track) - 1
    step = p[last] - p[last - 1] if last > 0 else np.zeros(3)
    return p[last] + (index - last) * step, q[last]


def align(b, anchor_position, anchor_rotation, rig):
    """B′: b's floor channels rotated about Z and translated so that b's root starts at
    anchor_position with the heading of anchor_rotation (4,). Returns (Track, ψ rad, offset (3,) m)
    where offset is the translation applied to b's first root position."""
    q0 = b.rotations[0, rig.root]
    psi = float(_twist_z(anchor_rotation) - _twist_z(q0))
    psi = float(np.arctan2(np.sin(psi), np.cos(psi)))
    qz = np.array([np.cos(psi / 2), 0.0, 0.0, np.sin(psi / 2)])
    rz = quat.to_matrix(qz)
    rot = b.rotations.copy()
    rot[:, rig.floor_bones] = quat.mul(qz, rot[:, rig.floor_bones])
    pos = b.positions.copy()
    p0 = b.positions[0, rig.root_position].copy()
    target = np.array(anchor_position, dtype=float)
    if rig.keep_height:
        target[2] = p0[2]
    fp = rig.floor_positions
    pos[:, fp] = (pos[:, fp] - p0) @ rz.T + target
    return Track(rot, pos), psi, target - p0


# ------------------------------------------------------------------------------ splicing

def splice(a, b, window, kind="smoothstep", rig=None):
    """A then B′ (B aligned to A) blended over `window` frames: a Track of len(a) + len(b) −
    window frames. Returns (track, info) with info = {"start": first frame of the window in
    the result, "window", "heading_rad", "offset" (3,) m}. Raises ValueError when the window
    is longer than either clip."""
    rig = rig or Rig()
    window = int(window)
    if window < 0 or window > min(len(a), len(b)):
        raise ValueError(f"a window of {window} frames does not fit clips of {len(a)} and {len(b)} frames")
    start = len(a) - window
    anchor_p, anchor_q = _anchor(a, start, rig)
    b2, psi, offset = align(b, anchor_p, anchor_q, rig)
    alpha = blend_weights(window, kind)
    rot = np.concatenate([a.rotations, b2.rotations[window:]], axis=0)
    pos = np.concatenate([a.positions, b2.positions[window:]], axis=0)
    if window:
        qa, qb = a.rotations[start:], b2.rotations[:window]
        rot[start:len(a)] = quat.slerp(qa, qb, alpha[:, None])
        pos[start:len(a)] = (1.0 - alpha)[:, None, None] * a.positions[start:] \
            + alpha[:, None, None] * b2.positions[:window]
        # root channels: blend the steps (velocities), not the positions, so no step is
        # longer than A's or B's own; B′ then continues from where the window ends
        fp = rig.floor_positions
        steps = (1.0 - alpha[1:, None, None]) * np.diff(a.positions[start:, fp], axis=0) \
            + alpha[1:, None, None] * np.diff(b2.positions[:window, fp], axis=0)
        path = a.positions[start, fp] + np.concatenate([np.zeros((1,) + steps.shape[1:]),
                                                        np.cumsum(steps, axis=0)])
        shift = path[-1] - b2.positions[window - 1, fp]
        pos[start:len(a), fp] = path
        pos[len(a):, fp] = b2.positions[window:, fp] + shift
        offset = offset + shift[list(fp).index(rig.root_position)]
    return Track(rot, pos), {"start": start, "window": window, "heading_rad": psi, "offset": offset}


# ------------------------------------------------------------------------------- quality

def velocity_changes(rotations, fps, frames=None):
    """Per-frame velocity change D(k) (rad/s) at frame indices k (default: every interior
    frame 1 … F−2) of rotations (F, B, 4): metrics.splice_velocity_jump at each k."""
    n = len(rotations)
    if n < 3:
        return np.zeros(0)
    frames = np.arange(1, n - 1) if frames is None else np.asarray(frames, dtype=np.intp)
    return splice_velocity_jump(np.arange(n) / float(fps), rotations, frames)


def _seam_frames(start, window, n):
    """Frame indices whose velocity change touches a window [start, start + window): from the
    frame before it to the frame after it, within 1 … n−2."""
    lo, hi = max(start - 1, 1), min(start + max(window, 1), n - 2)
    return np.arange(lo, hi + 1)


def seam_velocity_jump(rotations, fps, start, window):
    """D of one seam (rad/s): the largest velocity change over the transition."""
    frames = _seam_frames(start, window, len(rotations))
    return float(velocity_changes(rotations, fps, frames).max()) if len(frames) else 0.0


def default_threshold(tracks, fps, percentile=99.0):
    """ε (rad/s): the largest over the tracks of the `percentile` of their own per-frame
    velocity changes D(k) (see the module docstring)."""
    own = [np.percentile(velocity_changes(t.rotations, fps), percentile) for t in tracks if len(t) >= 3]
    if not own:
        raise ValueError("clips need at least 3 frames to measure their velocity changes")
    return float(max(own))


def limit_excess(rotations, lower, upper):
    """Largest amount (rad) by which any bone's rotation-vector component log(q) leaves
    [lower, upper] (B, 3) rad, per frame: (F,)."""
    x = quat.log(rotations)
    return np.maximum(np.maximum(x - upper, lower - x), 0.0).max(axis=(-1, -2))


def seam_report(track, fps, info, threshold, rig=None, limits=None):
    """QC of one seam of a composed track: {"start", "window", "velocity_jump" (rad/s),
    "threshold", "flagged", "root_jump" (m/s: largest change of root velocity over the
    transition), "heading_deg", "root_offset_m" (horizontal translation given to B),
    "limit_excess_deg" (None without limits = (lower, upper) arrays (B, 3) rad)}."""
    rig = rig or Rig()
    start, window = info["start"], info["window"]
    d = seam_velocity_jump(track.rotations, fps, start, window)
    frames = _seam_frames(start, window, len(track))
    root_jump = 0.0
    if track.positions.shape[1] and len(frames):
        p = track.positions[:, rig.root_position] * float(fps)
        root_jump = float(np.linalg.norm((p[frames + 1] - p[frames]) - (p[frames] - p[frames - 1]), axis=-1).max())
    excess = None
    if limits is not None:
        lo, hi = max(start - 1, 0), min(start + window + 1, len(track))
        excess = float(np.degrees(limit_excess(track.rotations[lo:hi], *limits).max()))
    return {"start": int(start), "window": int(window), "velocity_jump": d, "threshold": float(threshold),
            "flagged": bool(d > threshold), "root_jump": root_jump,
            "heading_deg": float(np.degrees(info["heading_rad"])),
            "root_offset_m": float(np.linalg.norm(np.asarray(info["offset"])[:2])),
            "limit_excess_deg": excess}


def suggest_window(a, b, fps, threshold, kind="smoothstep", rig=None, max_window=None):
    """The shortest window (frames) whose splice of a and b has D ≤ threshold (rad/s).

    Every window 0, 1, … max_window (default: the shorter clip) is tried in turn on the
    frames near the seam only (A's last window + 2 frames, B's first max(window, 1) + 2): D there
    equals D of the full splice, which needs frames from two before the window to two
    after it. Returns (window, D at it, found): when no window is good enough, the window
    with the smallest D and found False.
    """
    limit = min(len(a), len(b)) if max_window is None else min(int(max_window), len(a), len(b))
    best = (0, np.inf)
    for w in range(0, limit + 1):
        tail_a = a.slice(max(len(a) - w - 2, 0), len(a))
        head_b = b.slice(0, min(len(b), max(w, 1) + 2))
        part, info = splice(tail_a, head_b, w, kind, rig)
        d = seam_velocity_jump(part.rotations, fps, info["start"], w)
        if d <= threshold:
            return w, d, True
        if d < best[1]:
            best = (w, d)
    return best[0], best[1], False


def compose(tracks, fps, windows=None, kinds="smoothstep", rig=None, threshold=None, max_window=None,
            limits=None):
    """Splice tracks in order into one Track, with per-seam QC.

    windows: one int per seam (len(tracks) − 1), None entries (or windows None) taking
    suggest_window's; kinds: one curve name, or one per seam; threshold ε (rad/s, default
    per seam: default_threshold of the two clips it joins); max_window caps suggested
    windows (frames).
    A window never reaches into the previous seam's window. Returns (track, seams) with
    seams a list of seam_report dicts plus "index" (1-based seam number), "suggested"
    (the suggested window) and "suggest_found".
    """
    if not tracks:
        raise ValueError("nothing to compose")
    rig = rig or Rig()
    n_seams = len(tracks) - 1
    windows = [None] * n_seams if windows is None else list(windows)
    kinds = [kinds] * n_seams if isinstance(kinds, str) else list(kinds)
    if len(windows) != n_seams or len(kinds) != n_seams:
        raise ValueError(f"{len(tracks)} clips have {n_seams} seams: give one window and curve per seam")
    out = tracks[0]
    free = len(out)          # frames at the end of `out` that no earlier window blended
    seams = []
    for i, (b, w, kind) in enumerate(zip(tracks[1:], windows, kinds), start=1):
        eps = default_threshold(tracks[i - 1:i + 1], fps) if threshold is None else float(threshold)
        cap = min(free, len(b)) if max_window is None else min(free, len(b), int(max_window))
        suggested, _d, found = suggest_window(out, b, fps, eps, kind, rig, cap)
        w = suggested if w is None else int(w)
        if w > min(free, len(b)):
            raise ValueError(f"seam {i}: a window of {w} frames reaches into the previous seam or past "
                             f"the clip ({min(free, len(b))} frames available)")
        out, info = splice(out, b, w, kind, rig)
        free = len(b) - w
        rep = seam_report(out, fps, info, eps, rig, limits)
        rep.update(index=i, suggested=int(suggested), suggest_found=bool(found), curve=kind)
        seams.append(rep)
    rot = quat.make_continuous(out.rotations)
    return Track(rot, out.positions), seams


# ---------------------------------------------------------------------------- layering

def apply_layer(base, layer, weight, mask=None, reference=None):
    """Additive layer: q = q_base ⊗ (q_layer ⊗ q_ref⁻¹)^w per frame and masked bone.

    base, layer: rotations (F, B, 4); weight: (F,) or scalar (0 = no effect, 1 = the
    layer's full delta); mask: (B,) bool, bones the layer may change (default all);
    reference: q_ref (B, 4) or (F, B, 4), default the layer's first frame. The power is
    exp(w · log(δ)) on the shortest arc. Unmasked bones are returned bit-identical.
    Returns (F, B, 4).
    """
    base = np.asarray(base, dtype=float)
    layer = np.asarray(layer, dtype=float)
    if base.shape != layer.shape:
        raise ValueError(f"layer shape {layer.shape} differs from the base's {base.shape}")
    ref = layer[0] if reference is None else np.asarray(reference, dtype=float)
    w = np.broadcast_to(np.asarray(weight, dtype=float), (len(base),))
    mask = np.ones(base.shape[1], dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    delta = quat.mul(layer[:, mask], quat.conj(np.broadcast_to(ref, layer.shape)[:, mask]))
    scaled = quat.exp(w[:, None, None] * quat.log(delta))
    out = base.copy()
    out[:, mask] = quat.make_continuous(quat.normalize(quat.mul(base[:, mask], scaled)), base[0, mask])
    return out


# --------------------------------------------------------------------------- foot locking

def lock_feet(positions, feet, start, window, rig=None, height=0.05, speed=0.1, fps=24.0):
    """Keep planted feet still through a window by moving the root horizontally.

    positions: (F, P, 3) composed positions; feet: (F, K, 3) composed world (floor frame)
    positions of the feet, m. A foot is planted when, at the window's first frame, it is
    within `height` m of the lowest foot point and slower than `speed` m/s; the lowest
    planted foot's horizontal drift from that frame through the window is subtracted from
    the root position (and the offset reached at the window's end is kept afterwards, so
    the root does not jump back). Returns (positions, locked foot index or None).
    """
    rig = rig or Rig()
    positions = np.array(positions, dtype=float)
    if feet.shape[1] == 0 or window < 1:
        return positions, None
    s = int(start)
    floor = feet[..., 2].min()
    v = np.linalg.norm(feet[s] - feet[max(s - 1, 0)], axis=-1) * fps      # A's step into the window
    planted = np.flatnonzero((feet[s, :, 2] - floor < height) & (v < speed))
    if not len(planted):
        return positions, None
    k = planted[np.argmin(feet[s, planted, 2])]
    end = min(s + window, len(feet))
    drift = np.zeros((len(feet), 3))
    drift[s:end, :2] = feet[s:end, k, :2] - feet[s, k, :2]
    drift[end:, :2] = drift[end - 1, :2]
    positions[:, rig.floor_positions] -= drift[:, None, :]
    return positions, int(k)
