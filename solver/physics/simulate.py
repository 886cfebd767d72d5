"""The physics pass: simulate(model, reference, settings) -> SimResult.

Per frame interval the state is advanced by implicit steps (integrator.py) chosen by
step doubling: one step of size h against two of h/2 from the same
evaluation; the two half steps are kept, and an interval whose estimate exceeds the
tolerance is halved again, up to `max_substeps` steps per frame. The estimate (the
single step) is skipped when the previous frame was taken as one step pair at level 0
and no contact penetrates at the frame start: that frame is then two half steps (still
halved against tunnelling). Independently, an
interval is halved while contact points move more than half a capsule radius within a
step (anti-tunnelling), up to `max_tunnel_substeps`. The contact stiffness follows the
adaptive schedule of SimSettings times the animator's per-frame multiplier, and failures walk
the fallback ladder: smaller steps, then softer contacts and more damping,
then a kinematic pass-through of the frame. Everything is deterministic.
"""

from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np

from ..core import quat
from . import dynamics
from ..core.settings import (CONTACT_DAMPING, CONTACT_STIFFNESS, DEFAULT_DAMPING_RATIO, DEFAULT_FREQUENCY_HZ,
                             FEEDFORWARD, GROUPS, MAX_SUBSTEPS, OTHER_FREQUENCY_HZ, PRESETS, SCHEDULE,
                             SUBSTEP_CHOICES, TARGET_DEPTH_MM, preset_values)
from .contact_depths import bone_contacts, field_clearance, intended_mask
from .integrator import Physics, State, StepFailure, Target, evaluate, face_samples, face_tunnelling, implicit_step
from .capsule_contacts import capsule_tunnelling, pair_depths
from ..core.kinematics import capsule_segments, forward_kinematics
from .joint_limits import project_limits
from .reference import ReferenceSpline, fit_reference
from ..core.sdf import build_distance_grid


@dataclass(frozen=True)
class GroupGains:
    """PD gains of one joint group: natural frequency (Hz) and damping ratio (1 = critical)."""

    frequency_hz: float
    damping_ratio: float = 1.0


DEFAULT_GAINS = MappingProxyType({g: GroupGains(DEFAULT_FREQUENCY_HZ[g], DEFAULT_DAMPING_RATIO)
                                  for g in GROUPS})

LEVEL_SMALLER_STEPS, LEVEL_SOFTER, LEVEL_KINEMATIC = 1, 2, 3


@dataclass(frozen=True, eq=False)
class SimSettings:
    """Physics-pass settings (SI units unless stated).

    group_gains: {group label: GroupGains}; default_gains for groups not listed.
    feedforward: add the computed-torque feedforward M(q) q̈_ref + c(q, q̇) to the PD
        torque (_FrameStepper.tau_ff).
    contact_stiffness N/m (initial kp), contact_damping N·s/m.
    schedule: adapt kp per frame, kp ← clamp(kp (1 + eta (d_max − d_target)/d_target),
        k_min, k_max) on frames with contact (d_target m, eta, k_min/k_max N/m).
    stiffness_multiplier: optional (n_frames,) animator curve multiplying kp per frame.
    limit_frequency_hz, limit_damping_ratio: joint-limit penalty inside a step.
    max_substeps: power of two, most steps per frame chosen by step doubling;
    tolerance rad: step-doubling bound on the largest bone-rotation difference;
    max_tunnel_substeps: power of two ≥ max_substeps, most steps per frame when
        halving against tunnelling; gravity m/s² along −Z;
    sdf_spacing, sdf_margin m: face distance grid resolution and padding;
    smooth_reference: track a zero-phase smoothing fit of the keyed bone rotations
        (reference.fit_reference) instead of the keys themselves, with
        fit_tolerance_deg (largest RMS residual, degrees) and spike_deg (smallest
        single-frame spike rejected, degrees).
    contact_passes: 1, or 2 for a second pass that tracks the reference corrected by
        the first pass's contact deflections, smoothed in time (anticipation_s s, the
        Gaussian's standard deviation): contact_corrected_reference.
    lead_in_s: when the first keyed pose penetrates a contact, that pose is held this
        long (s, whole frames) before the clip starts, so that the contact is resolved
        by frame 0 (with_lead_in).
    project: the bake tracks the fitted reference projected onto collision-free poses
        (physics.project, run by the bake before simulate) instead of the reference.
    """

    group_gains: object = field(default_factory=lambda: DEFAULT_GAINS)
    default_gains: GroupGains = GroupGains(OTHER_FREQUENCY_HZ)
    feedforward: bool = FEEDFORWARD
    contact_stiffness: float = CONTACT_STIFFNESS
    contact_damping: float = CONTACT_DAMPING
    schedule: bool = SCHEDULE
    d_target: float = TARGET_DEPTH_MM * 1e-3
    eta: float = 0.1
    k_min: float = 5e3
    k_max: float = 3e6
    stiffness_multiplier: np.ndarray = None
    limit_frequency_hz: float = 30.0
    limit_damping_ratio: float = 1.0
    max_substeps: int = MAX_SUBSTEPS
    tolerance: float = 0.02
    max_tunnel_substeps: int = 32
    gravity: float = dynamics.GRAVITY
    sdf_spacing: float = 0.005
    sdf_margin: float = 0.02
    smooth_reference: bool = True
    fit_tolerance_deg: float = 2.0
    spike_deg: float = 8.0
    contact_passes: int = 2
    anticipation_s: float = 0.05
    lead_in_s: float = 0.3
    project: bool = False

    @classmethod
    def from_values(cls, values, stiffness_multiplier=None, **overrides):
        """Settings from the table's value names (solver.core.settings.preset_values: per-group
        "<group>_frequency" Hz and "<group>_damping", contact values, "target_depth_mm" mm,
        "use_schedule", "max_substeps"), with field overrides. Raises ValueError for a
        max_substeps outside SUBSTEP_CHOICES; the rest is checked by validate."""
        if str(values["max_substeps"]) not in {str(n) for n in SUBSTEP_CHOICES}:
            raise ValueError(f"max_substeps must be one of {', '.join(map(str, SUBSTEP_CHOICES))}, "
                             f"not {values['max_substeps']!r}")
        gains = MappingProxyType({g: GroupGains(float(values[f"{g}_frequency"]), float(values[f"{g}_damping"]))
                                  for g in GROUPS})
        fields = dict(group_gains=gains, feedforward=bool(values["feedforward"]),
                      contact_stiffness=float(values["contact_stiffness"]),
                      contact_damping=float(values["contact_damping"]), schedule=bool(values["use_schedule"]),
                      d_target=float(values["target_depth_mm"]) * 1e-3, max_substeps=int(values["max_substeps"]),
                      stiffness_multiplier=stiffness_multiplier)
        return cls(**{**fields, **overrides})

    @classmethod
    def preset(cls, name, **overrides):
        """Settings for preset "soft", "default" or "stiff" (solver.core.settings.PRESETS),
        with field overrides; bones outside the table's groups get OTHER_FREQUENCY_HZ
        scaled like the groups.

        Raises ValueError for an unknown preset name.
        """
        values = preset_values(name)
        default = GroupGains(OTHER_FREQUENCY_HZ * PRESETS[name].frequency_scale)
        return cls.from_values(values, **{"default_gains": default, **overrides})

    def validate(self, n_frames):
        """Raise ValueError for inconsistent values; return the (n_frames,) multiplier."""
        def power_of_two(n):
            return isinstance(n, (int, np.integer)) and n >= 1 and (n & (n - 1)) == 0
        if not power_of_two(self.max_substeps) or not power_of_two(self.max_tunnel_substeps):
            raise ValueError("max_substeps and max_tunnel_substeps must be powers of two")
        if self.max_tunnel_substeps < self.max_substeps:
            raise ValueError("max_tunnel_substeps must be >= max_substeps")
        if self.contact_passes not in (1, 2):
            raise ValueError("contact_passes must be 1 or 2")
        positive = ("contact_stiffness", "d_target", "k_min", "k_max", "tolerance",
                    "sdf_spacing", "sdf_margin", "limit_frequency_hz", "fit_tolerance_deg", "spike_deg",
                    "anticipation_s")
        for name in positive:
            if not np.isfinite(getattr(self, name)) or not getattr(self, name) > 0:
                raise ValueError(f"{name} must be a positive finite number")
        for name in ("contact_damping", "eta", "gravity", "limit_damping_ratio", "lead_in_s"):
            if not np.isfinite(getattr(self, name)) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be a non-negative finite number")
        if self.k_min > self.k_max:
            raise ValueError("k_min must not exceed k_max")
        for g in list(self.group_gains.values()) + [self.default_gains]:
            if not (g.frequency_hz >= 0 and g.damping_ratio >= 0 and np.isfinite(g.frequency_hz)
                    and np.isfinite(g.damping_ratio)):
                raise ValueError("gains must be finite and non-negative")
        if self.stiffness_multiplier is None:
            return np.ones(n_frames)
        m = np.asarray(self.stiffness_multiplier, dtype=float)
        if m.shape != (n_frames,) or not np.all(np.isfinite(m)) or np.any(m <= 0):
            raise ValueError(f"stiffness_multiplier must be {n_frames} positive finite values")
        return m


@dataclass(frozen=True, eq=False)
class SimResult:
    """Output of simulate (n = n_frames; entry k describes the interval ending at frame k,
    entry 0 is the initial state).

    rotations (n, n_bones, 4): local pose quaternions w-first, hemisphere-continuous;
    velocities (n, n_dof) rad/s; penetration_mm (n,): deepest contact per frame (mm);
    substeps (n,) int: steps taken per frame; fallback_level (n,) int: 0 normal,
    1 smaller steps, 2 softer contacts + more damping, 3 kinematic pass-through;
    fallback_counts (3,) int: frames per level 1..3; energy (n,) J: kinetic (world) +
    gravitational potential; contact_stiffness (n,) N/m: kp in effect per frame.
    """

    rotations: np.ndarray
    velocities: np.ndarray
    penetration_mm: np.ndarray
    substeps: np.ndarray
    fallback_level: np.ndarray
    fallback_counts: np.ndarray
    energy: np.ndarray
    contact_stiffness: np.ndarray


def dof_gains(model, settings):
    """Natural frequency (n_dof,) rad/s and damping ratio (n_dof,) from the group labels."""
    gains = [settings.group_gains.get(g, settings.default_gains) for g in model.groups]
    freq = np.array([g.frequency_hz for g in gains])[model.dof_bone]
    zeta = np.array([g.damping_ratio for g in gains])[model.dof_bone]
    return 2.0 * np.pi * freq, zeta


class ReferenceTrack:
    """Reference targets (integrator.Target) and accelerations q̈_ref on a grid of `grid`
    points per frame interval (index k·grid + j is frame k plus j/grid of its interval;
    grid a power of two).

    Targets come from the spline in batches for chunks of frames as the simulation
    reaches them. Fractional indices (the finer anti-tunnelling steps: binary fractions
    of a grid cell) are sampled in one batch per frame interval and level of refinement
    when the first of them is asked for, with the same time arithmetic as the grid.

    fields: None, or the Physics' FaceSamples: then each target carries the allowance
    of every capsule pair and field sample (Target.allowance): how much deeper than at
    both keys of its interval the reference's own path takes it, max(0, d(t) −
    max(d(t_k), d(t_k+1), 0)) with d the pair's r₁ + r₂ − axis distance or the sample's
    r − φ. A C² path through two clear keys of a fast closure (a fist in one frame) can
    sweep a fingertip through the palm or a finger between them; that dip is the
    interpolant's, not a contact the motion makes, and pushing a light distal phalanx
    out of it throws the finger off its keys. The allowance is zero at every frame, so
    every key is still resolved as before. It is measured on the chunk's grid and
    interpolated linearly between grid points for the finer steps. intended: contacts
    made on purpose (simulate's argument, frame indices of `reference`): from the first
    to the last frame of each, its pair and samples are allowed at least its level.
    """

    def __init__(self, model, reference, grid, chunk_frames=64, fields=None, intended=()):
        self.model = model
        self.spline = ReferenceSpline(reference)
        self.times = reference.times
        self.grid = grid
        self.chunk_frames = chunk_frames
        self.fields = fields
        self._start = self._stop = 0
        self._targets = None
        self._made = {}
        self._fine = {}
        self._allowed = None
        self._intended = [(intended_mask(model, fields, a, b), reference.times[max(start, 0)],
                           reference.times[min(stop, len(reference.times)) - 1], level)
                          for a, b, start, stop, level in intended if fields is not None and level > 0]
        if fields is not None:
            s = self.spline.sample(self.times)
            self._key_depth = np.maximum(self._depths(self._target_rotations(s.rotations), s.base_position,
                                                      s.base_rotation), 0.0)  # (F, n_pairs + S)

    def grid_times(self, start, stop, grid=None):
        """Times (s) of grid points range(start, stop) on a grid of `grid` points per
        frame interval (default self.grid): t_k + (t_{k+1} − t_k)·j/grid, the last
        frame's time from the last frame on."""
        grid = self.grid if grid is None else grid
        k, j = np.divmod(np.arange(start, stop), grid)
        last = len(self.times) - 1
        kc = np.minimum(k, last - 1)
        t0 = self.times.take(kc)
        out = t0 + (self.times.take(kc + 1) - t0) * (j / grid)
        return np.where(k >= last, self.times[-1], out)

    def _chunk(self, index):
        # A chunk spans whole frame intervals including their end points, so one
        # interval never straddles two chunks.
        if not self._start <= index < self._stop:
            self._start = index - index % self.grid
            self._stop = min(self._start + self.chunk_frames * self.grid, (len(self.times) - 1) * self.grid) + 1
            times = self.grid_times(self._start, self._stop)
            self._targets = self._sample(times)
            self._allowed = self._allowance(times, *self._targets[:4])
            self._made = {}
            self._fine = {}
        return index - self._start

    def at_index(self, index):
        """Target at grid point `index`, an integer or a binary fraction (each is built
        once: steps share their end points)."""
        target = self._made.get(index)
        if target is None:
            fields, i = self._fields(index)
            target = self._made[index] = Target(*[a[i] for a in fields[:6]], allowance=self._allowance_at(index))
        return target

    def acceleration(self, index):
        """q̈_ref (n_dof,) rad/s² at grid point `index` (as at_index)."""
        fields, i = self._fields(index)
        return fields[6][i]

    def _allowance_at(self, index):
        """Target.allowance (n_pairs + S,) m at grid point `index` of the current chunk,
        linear between grid points, or None where it is zero."""
        if self._allowed is None:
            return None
        local = index - self._start
        lo = int(local)
        w = local - lo
        a = self._allowed[lo] if w == 0 else (1.0 - w) * self._allowed[lo] + w * self._allowed[lo + 1]
        return a if np.count_nonzero(a) else None

    def _fields(self, index):
        """(the _sample arrays holding grid point `index`, its row in them)."""
        if index == int(index):
            i = self._chunk(int(index))
            return self._targets, i
        self._chunk(int(index))
        level = 1
        while index * (1 << level) != int(index * (1 << level)):
            level += 1
        fine = int(index * (1 << level))
        per_frame = self.grid << level
        frame = fine // per_frame
        fields = self._fine.get((frame, level))
        if fields is None:
            fields = self._fine[(frame, level)] = self._sample(
                self.grid_times(frame * per_frame, (frame + 1) * per_frame + 1, per_frame))
        return fields, fine - frame * per_frame

    def _target_rotations(self, rotations):
        """The spline's rotations (T, n, 4) as the model tracks them: hinges follow only
        the twist about local X (swing-twist decomposition)."""
        model = self.model
        rot = rotations.copy()
        twist = rot[:, model.hinge] * np.array([1.0, 1.0, 0.0, 0.0])
        norm = np.linalg.norm(twist, axis=-1, keepdims=True)
        rot[:, model.hinge] = np.where(norm > 1e-12, twist / np.maximum(norm, 1e-12), quat.IDENTITY)
        return rot

    def _depths(self, rotations, base_positions, base_matrices):
        """Depths (T, n_pairs + S) m in the poses rotations (T, n, 4) (base_positions
        (T, 3) m, base_matrices (T, 3, 3)): every capsule pair's (contacts.pair_depths),
        then every field sample's r − φ."""
        kin = forward_kinematics(self.model, rotations, base_matrices, base_positions)
        return np.concatenate([pair_depths(self.model, capsule_segments(self.model, kin))]
                              + [-field_clearance(kin, f, base_positions, base_matrices) for f in self.fields],
                              axis=1)

    def _allowance(self, times, rotations, qd, base_matrices, base_positions):
        """The allowance (T, n_pairs + S) m at times (T,) s of the poses rotations
        (T, n, 4) (see the class docstring), or None without fields or where it is
        zero throughout; qd is not used (the _sample arrays in their order)."""
        if self.fields is None:
            return None
        k = np.clip(np.searchsorted(self.times, times, side="right") - 1, 0, len(self.times) - 2)
        keys = np.maximum(self._key_depth[k], self._key_depth[k + 1])
        allowance = np.maximum(self._depths(rotations, base_positions, base_matrices) - keys, 0.0)
        for mask, t0, t1, level in self._intended:
            on = (times >= t0) & (times <= t1)
            allowance[np.ix_(on, mask)] = np.maximum(allowance[np.ix_(on, mask)], level)
        return allowance if np.count_nonzero(allowance) else None

    def _sample(self, times):
        """Target fields (batched over times) followed by q̈_ref (T, n_dof)."""
        model = self.model
        s = self.spline.sample(times)
        rot = self._target_rotations(s.rotations)
        T = len(times)
        qd = s.omega.reshape(T, -1)[:, model.dof_flat]
        qdd = s.omega_dot.reshape(T, -1)[:, model.dof_flat]
        bv, ba = dynamics.base_motion(s.base_position, s.base_velocity, s.base_omega,
                                      s.base_acceleration, s.base_omega_dot)
        return rot, qd, s.base_rotation, s.base_position, bv, ba, qdd


class _FrameStepper:
    """Advances the state over one frame interval: step doubling, anti-tunnelling
    halving and the fallback ladder (see the module docstring)."""

    SOFT_CONTACT = 0.1  # contact stiffness factor on the "softer" rung
    SOFT_DAMPING = 4.0  # PD damping factor on the "softer" rung
    FINER = 4  # step-size divisor from the "smaller steps" rung on

    def __init__(self, model, physics, track, settings):
        self.model, self.physics, self.track, self.settings = model, physics, track, settings
        self.calm = False  # the previous frame took one step pair at level 0

    def _skip_estimate(self, ev):
        # Step doubling's error estimate (the single step over the frame) is skipped
        # when the previous frame needed no refinement and no contact penetrates at the
        # frame start: the frame is then taken as two half steps, still refined
        # against tunnelling.
        return self.calm and not np.count_nonzero(ev.depth > 0.0)

    def advance(self, ev, k, H, contact_stiffness):
        """(Evaluation at the frame end, steps taken, deepest penetration m, ladder level)."""
        for level in (0, LEVEL_SMALLER_STEPS, LEVEL_SOFTER):
            soft = level >= LEVEL_SOFTER
            self.contact_k = contact_stiffness * (self.SOFT_CONTACT if soft else 1.0)
            self.damping = self.SOFT_DAMPING if soft else 1.0
            finer = self.FINER if level >= LEVEL_SMALLER_STEPS else 1
            self.min_err = H / (self.settings.max_substeps * finer) * (1.0 - 1e-9)
            self.min_tunnel = H / (self.settings.max_tunnel_substeps * finer) * (1.0 - 1e-9)
            estimate = level > 0 or not self._skip_estimate(ev)
            try:
                end, steps, depth = self.interval(ev, k * self.track.grid, self.track.grid, H, None, estimate)
            except StepFailure:
                continue
            self.calm = level == 0 and steps == 2
            return end, steps, depth, level
        self.calm = False
        tgt = self.track.at_index((k + 1) * self.track.grid)
        end = evaluate(self.model, self.physics, _limited_state(self.model, tgt), tgt)
        return end, 0, end.penetration, LEVEL_KINEMATIC

    def tau_ff(self, e0, index):
        """Computed-torque feedforward M(q) q̈_ref + c(q, q̇) at the step start (N·m), or None.

        At the simulated state rather than the reference's, so that the inertial,
        Coriolis, gravity and base-motion torques of the actual motion cancel exactly
        and the PD gains act on the tracking error alone (computed-torque control:
        Craig, "Introduction to Robotics: Mechanics and Control", ch. 10; Khosla &
        Kanade, "Experimental evaluation of nonlinear feedback and feedforward control
        schemes for manipulators", 1988). A deviation pushed in by a contact is then
        pulled back by the PD spring only, instead of being flung around by the parent
        chain's motion (a finger on a swinging arm).
        """
        if not self.settings.feedforward:
            return None
        return e0.mass_matrix @ self.track.acceleration(index) + e0.bias

    def step(self, e0, index, length, h):
        # Grid indices are exact binary fractions of a frame interval (ReferenceTrack).
        return implicit_step(self.model, self.physics, e0, self.tau_ff(e0, index),
                             self.track.at_index(index + 0.5 * length), self.track.at_index(index + length), h,
                             self.contact_k, self.settings.contact_damping, self.damping)

    def tunnelling(self, e0, e1):
        return (capsule_tunnelling(self.model, e0.segments, e1.segments, e0.capsules)
                or face_tunnelling(self.physics, e0, e1))

    def interval(self, e0, index, length, h, big, estimate=True):
        """Advance e0 (at grid index `index`) over h s (`length` grid cells).

        `big` is the single step over the interval when already known (the parent's half
        step). estimate=False takes the two half steps without the error estimate.
        Returns (Evaluation at the end, steps taken, deepest penetration m).
        """
        model, physics = self.model, self.physics
        half = 0.5 * length
        if 0.5 * h >= self.min_err:
            first = self.step(e0, index, half, 0.5 * h)
            if estimate and big is None:  # step doubling's single step, from the same e0
                big = self.step(e0, index, length, h)
            e_mid = evaluate(model, physics, first, self.track.at_index(index + half))
            # Tunnelling in the first half step splits the interval whatever the error
            # estimate says, so the second half step is not needed.
            may_split = 0.25 * h >= self.min_tunnel
            if may_split and self.tunnelling(e0, e_mid):
                return self.split(e0, index, half, h, e_mid.state)
            e_end = evaluate(model, physics, self.step(e_mid, index + half, half, 0.5 * h),
                             self.track.at_index(index + length))
            if estimate and 0.25 * h >= self.min_err and (
                    quat.angle_between(big.rotations, e_end.state.rotations).max() > self.settings.tolerance):
                return self.split(e0, index, half, h, e_mid.state)
            if may_split and self.tunnelling(e_mid, e_end):
                return self.split(e0, index, half, h, e_mid.state)
            return e_end, 2, max(e_mid.penetration, e_end.penetration)
        new = self.step(e0, index, length, h) if big is None else big
        e_end = evaluate(model, physics, new, self.track.at_index(index + length))
        if 0.5 * h >= self.min_tunnel and self.tunnelling(e0, e_end):
            return self.split(e0, index, half, h, None)
        return e_end, 1, e_end.penetration

    def split(self, e0, index, half, h, first_big):
        e1, n1, d1 = self.interval(e0, index, half, 0.5 * h, first_big)
        e2, n2, d2 = self.interval(e1, index + half, half, 0.5 * h, None)
        return e2, n1 + n2, max(d1, d2)


def _limited_state(model, target):
    """The reference state at `target`, projected into the joint limits."""
    return State(*project_limits(model, target.rotations, target.qd))


def contact_corrected_reference(model, tracked, rotations, touching, anticipation_s):
    """The tracked Reference corrected by a first pass's contact deflections, spread in time.

    tracked: the Reference the pass followed; rotations (F, n_bones, 4): its result;
    touching (F, n_bones) bool: bones in contact (body.bone_contacts). The deflection
    δ = log(q_ref* q) of each bone is kept where the bone or one it carries touches
    (elsewhere δ is tracking error, which a second pass must not add to its target),
    smoothed by a zero-phase Gaussian of standard deviation anticipation_s seconds
    (scipy.ndimage.gaussian_filter1d), and composed onto the reference, q_ref ⊗ exp(δ̃).
    A second pass tracking this reference decelerates before a contact instead of
    being stopped by it within a step (iterative learning control: Arimoto, Kawamura &
    Miyazaki, "Bettering operation of robots by learning", 1984, with a smoothing
    filter). Returns a new Reference.
    """
    from scipy.ndimage import gaussian_filter1d
    carried = (touching.astype(float) @ model.ancestors) > 0  # (F, n)
    delta = quat.log(quat.conj_mul(tracked.rotations, rotations)) * carried[..., None]
    sigma = anticipation_s / float(np.mean(np.diff(tracked.times)))
    smooth = gaussian_filter1d(delta, sigma, axis=0, mode="nearest")
    return replace(tracked, rotations=quat.mul(tracked.rotations, quat.exp(smooth)))


def with_lead_in(reference, multiplier, lead_in_s):
    """(Reference, multiplier (n + L,), L): the first frame held for L = ⌈lead_in_s / Δt⌉
    frames before the clip (Δt its first frame interval), times shifted to stay increasing."""
    dt = float(reference.times[1] - reference.times[0])
    lead = int(np.ceil(lead_in_s / dt - 1e-9))
    if lead == 0:
        return reference, multiplier, 0

    def hold(a):
        return np.concatenate([np.repeat(a[:1], lead, axis=0), a])
    times = np.concatenate([reference.times[0] - dt * np.arange(lead, 0, -1), reference.times])
    return (replace(reference, times=times, rotations=hold(reference.rotations),
                    base_positions=hold(reference.base_positions), base_rotations=hold(reference.base_rotations)),
            hold(multiplier), lead)


def _without_lead_in(result, lead):
    """SimResult of the clip's own frames (a result of a lead_in run without its first `lead`)."""
    if lead == 0:
        return result
    level, substeps = result.fallback_level[lead:].copy(), result.substeps[lead:].copy()
    level[0] = substeps[0] = 0  # entry 0 is the initial state (reached by the lead-in's steps)
    return SimResult(result.rotations[lead:], result.velocities[lead:], result.penetration_mm[lead:],
                     substeps, level, np.array([np.count_nonzero(level == lv) for lv in (1, 2, 3)]),
                     result.energy[lead:], result.contact_stiffness[lead:])


def simulate(model, reference, settings=None, progress=None, face_grid=None, fields=(), intended=()):
    """Physics pass over a reference animation.

    model: SkeletonModel; reference: Reference with rotations (n_frames, model.n_bones, 4);
    settings: SimSettings (default SimSettings()); progress: optional callable receiving
    the completed fraction in [0, 1] after each frame (raise from it to abort);
    face_grid: optional prebuilt sdf.DistanceGrid of the reference's face mesh (it is
    otherwise built here, which costs about a second for a few thousand triangles);
    fields: further integrator.FaceSamples (body volumes: torso, palms, a face from the skin);
    intended: [(bone a, bone b, start, stop, level m)] contacts made on purpose on the
    reference's frames [start, stop) (body.contact_depths' convention): there the pair
    a–b and a's samples in b's field (or b's in a's) push back only beyond `level`, so
    the simulation keeps the touch the reference makes.
    A first pose in contact is held for settings.lead_in_s before the clip starts (with_lead_in).
    With settings.contact_passes = 2 and any contact in the first pass, a second pass
    tracks contact_corrected_reference and its result is returned (substeps, fallbacks
    and stiffness are the second pass's).
    Returns SimResult. Raises ValueError on inconsistent inputs. Never returns NaN:
    frames whose steps fail are retried down the fallback ladder.
    """
    settings = SimSettings() if settings is None else settings
    if reference.rotations.shape[1] != model.n_bones:
        raise ValueError(f"reference has {reference.rotations.shape[1]} bones, model has {model.n_bones}")
    n = reference.n_frames
    multiplier = settings.validate(n)
    omega, zeta = dof_gains(model, settings)
    face = ()
    if reference.face_vertices is not None:
        if face_grid is None:
            face_grid = build_distance_grid(reference.face_vertices, reference.face_triangles,
                                            reference.face_bone, settings.sdf_spacing, settings.sdf_margin)
        elif face_grid.bone != reference.face_bone:
            raise ValueError("face_grid is attached to a different bone than reference.face_bone")
        face = (face_samples(model, face_grid),)
    physics = Physics(omega, zeta, 2.0 * np.pi * settings.limit_frequency_hz,
                      settings.limit_damping_ratio, settings.gravity, face + tuple(fields))
    tracked = fit_reference(reference, settings.fit_tolerance_deg, settings.spike_deg) if settings.smooth_reference \
        else reference
    lead = 0
    first = ReferenceTrack(model, tracked, 1).at_index(0)
    if evaluate(model, physics, _limited_state(model, first), first).penetration > 0.0:
        # Only a first pose in contact is held: a clip that starts moving keeps its start.
        tracked, multiplier, lead = with_lead_in(tracked, multiplier, settings.lead_in_s)
    intended = [(a, b, start + lead, stop + lead, level) for a, b, start, stop, level in intended]
    share = 1.0 / settings.contact_passes
    result = _single_pass(model, physics, tracked, settings, multiplier, lead, intended,
                          None if progress is None else (lambda x: progress(share * x)))
    touching = None
    if settings.contact_passes == 2 and result.penetration_mm.max() > 0.0:
        touching = bone_contacts(model, result.rotations, tracked.base_positions, tracked.base_rotations,
                                 physics.fields)
    if touching is None or not np.count_nonzero(touching):
        if progress is not None:
            progress(1.0)
        return _without_lead_in(result, lead)
    if progress is not None:
        progress(share)
    corrected = contact_corrected_reference(model, tracked, result.rotations, touching, settings.anticipation_s)
    result = _single_pass(model, physics, corrected, settings, multiplier, lead, intended,
                          None if progress is None else (lambda x: progress(share + share * x)))
    if progress is not None:
        progress(1.0)
    return _without_lead_in(result, lead)


def _single_pass(model, physics, tracked, settings, multiplier, lead, intended, progress):
    """One simulation of the whole clip tracking the Reference `tracked` (see simulate);
    progress is reported for the frames after the `lead` lead-in frames but the last."""
    n = tracked.n_frames
    # Steps of H/max_substeps sample the reference at their middle: grid of 2·max_substeps.
    track = ReferenceTrack(model, tracked, 2 * settings.max_substeps, fields=physics.fields, intended=intended)
    first = track.at_index(0)
    ev = evaluate(model, physics, _limited_state(model, first), first)
    rotations = np.empty((n, model.n_bones, 4))
    velocities = np.empty((n, model.n_dof))
    penetration = np.zeros(n)
    substeps = np.zeros(n, dtype=np.intp)
    level_of = np.zeros(n, dtype=np.intp)
    energy = np.empty(n)
    stiffness = np.empty(n)
    rotations[0], velocities[0] = ev.state.rotations, ev.state.velocity
    penetration[0] = ev.penetration
    energy[0] = ev.energy(model, settings.gravity)
    stiffness[0] = settings.contact_stiffness * multiplier[0]
    kp = settings.contact_stiffness

    stepper = _FrameStepper(model, physics, track, settings)
    for k in range(n - 1):
        k_eff = kp * multiplier[k + 1]
        ev, steps, d_max, level = stepper.advance(ev, k, tracked.times[k + 1] - tracked.times[k], k_eff)
        i = k + 1
        rotations[i], velocities[i] = ev.state.rotations, ev.state.velocity
        penetration[i], substeps[i], level_of[i] = d_max, steps, level
        energy[i] = ev.energy(model, settings.gravity)
        stiffness[i] = k_eff
        if settings.schedule and d_max > 0.0:
            kp = float(np.clip(kp * (1.0 + settings.eta * (d_max - settings.d_target) / settings.d_target),
                               settings.k_min, settings.k_max))
        if progress is not None and lead < i < n - 1:  # the caller reports the pass's end
            progress((i - lead) / (n - 1 - lead))

    counts = np.array([np.count_nonzero(level_of == lv) for lv in (1, 2, 3)])
    return SimResult(quat.make_continuous(quat.normalize(rotations), tracked.rotations[0]), velocities,
                     penetration * 1e3,
                     substeps, level_of, counts, energy, stiffness)
