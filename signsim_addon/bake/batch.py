"""Batch: retarget and bake every (matching) library clip on a Dask cluster.

One Dask task per clip (dask.distributed: a local cluster of `workers` processes, or the
cluster whose scheduler is at `scheduler`). Each task runs the clip as two fresh child
processes of the same CLI — `retarget` then `bake` — so a crash or a bad clip never takes
the batch down. The child command is the running Blender (`blender -b -c signsim …`) or,
through the bpy module, the `./signsim` launcher (which exports SIGNSIM_CLI); on a remote
worker its own SIGNSIM_CLI wins, since Blender may live elsewhere there. Inputs and the
output folder must be one shared path on every machine; the bake writes its .blend and
.json atomically; the retargeted intermediate is removed when the task ends.
A worker that dies mid-clip has its clip run again by the scheduler (Dask's
`distributed.scheduler.allowed-failures`). Ctrl-C or SIGTERM sets a cluster-wide event:
running tasks stop their child (SIGTERM, which removes its temporary files) and waiting
tasks return at once, so no partial output is left; finished clips keep their files.

The task functions below use the standard library only and are sent to the workers by
value (cloudpickle), so a worker needs Python with dask.distributed, not this add-on.
Source: Dask distributed documentation (Client.submit, as_completed, Event, SubprocessCluster).
"""
import asyncio
import json
import logging
import math
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, replace

import bpy

from .. import files
from ..library import api as library
from ..retarget import api as retarget
from ..errors import INFO, WARNING, BadOption, SignSimError, silent
from ..progress import eta_text

EXIT_VERDICT = 3  # `bake`/`batch`: written, but a clip's verdict is 'failed' ('check' too with --strict)


@dataclass(frozen=True, kw_only=True)
class BatchRequest(files.FileRequest):
    """Retarget and bake library clips onto one rig (files.FileRequest; out is a folder
    for one .blend and .json per clip): library (None: the preferences'), workers ≥ 1,
    text and tags (comma-separated) filters of the clips, preset (None or
    'soft'|'default'|'stiff'), project (None: the rig's Physics setting; False: track the
    reference itself, bake --no-project), fps (retarget.check_fps: each clip's own rate
    when None, "rig" the rig file's, else that rate in fps; passed to each retarget)."""
    library: str = None
    workers: int = 1
    text: str = ""
    tags: str = ""
    preset: str = None
    project: bool = None
    scheduler: str = None
    fps: object = None


def cli_command():
    """The argv prefix that runs SignSim's CLI in a child process. Raises SignSimError."""
    if os.environ.get("SIGNSIM_CLI"):
        return json.loads(os.environ["SIGNSIM_CLI"])
    if bpy.app.binary_path:  # the installed extension registers `-c signsim` at startup
        return [bpy.app.binary_path, "-b", "-c", "signsim"]
    raise SignSimError("batch needs the blender executable or the ./signsim launcher to start workers")


def clip_outputs(clip, out):
    """(retargeted .blend, baked .blend, metrics .json) batch writes for CLIP in folder OUT;
    the clip name with characters other than letters, digits, '-', '_', '.' as '_'."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in clip)
    return tuple(os.path.join(out, f"{safe}{ext}") for ext in (".retargeted.blend", ".blend", ".json"))


# How often a running task looks at the batch's cancel event (seconds).
POLL_S = 0.5
# How long an interrupted batch waits for its running tasks to stop their children (seconds).
CANCEL_WAIT_S = 60


def clips_eta(seconds, left, parallel):
    """Seconds until the `left` clips still to finish are done, when the finished clips took
    `seconds` (each its own wall seconds in its task: the cluster's start is not a clip's)
    and `parallel` clips run at once: the mean clip time for each round of `parallel`
    clips. None before a clip has finished."""
    if not seconds:
        return None
    return sum(seconds) / len(seconds) * math.ceil(left / max(parallel, 1))


def _last_json(stdout):
    """The last stdout line that is a JSON object ({} when none): Blender 4.5 prints its
    memory-leak report after the CLI's JSON line."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return {}


def _dies_with_parent():
    """A preexec_fn giving the child SIGTERM when the worker that started it dies (Linux
    prctl PR_SET_PDEATHSIG), so a killed worker leaves no orphan writing outputs; None
    elsewhere. The C function is looked up before the fork: the child only calls it."""
    if sys.platform != "linux":
        return None
    import ctypes
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG


def _run_child(argv, cancelled):
    """Run argv to the end, or until cancelled() is true (then SIGTERM and wait); returns
    (returncode or None when cancelled, stdout, stderr)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True, preexec_fn=_dies_with_parent())
        try:
            while True:
                try:
                    code = proc.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    if cancelled():
                        code = None
                        break
        finally:
            if proc.poll() is None:  # cancelled, or this thread was interrupted
                proc.terminate()
                proc.wait()
        out.seek(0)
        err.seek(0)
        return code, out.read(), err.read()


def run_clip(command, clip, job, cancel_event):
    """Retarget + bake one clip in fresh child processes; returns its result record (see
    bake_many, with "seconds": its wall seconds here; "cancelled": True when the batch was
    interrupted first).

    command: the CLI argv prefix (a worker's own SIGNSIM_CLI replaces it); job: dict of
    "library", "rig", "out", "armature", "preset" (absolute paths or None), "project" (None or
    bool: bake's --project/--no-project), "fps" (None or retarget's --fps value); cancel_event:
    name of the batch's dask.distributed Event (runs on a Dask worker)."""
    if os.environ.get("SIGNSIM_CLI"):
        command = json.loads(os.environ["SIGNSIM_CLI"])
    from distributed import Event
    start = time.monotonic()
    cancelled = Event(cancel_event).is_set
    retargeted, baked, metrics = clip_outputs(clip, job["out"])
    record = {"clip": clip, "warnings": [], "seconds": 0.0}
    step = ["retarget", "--clip", clip, "--library", job["library"], "--rig", job["rig"],
            "--out", retargeted, "--json"] + (["--armature", job["armature"]] if job["armature"] else []) \
        + ([] if job.get("fps") is None else ["--fps", f"{job['fps']}"])
    try:
        for name in ("retarget", "bake"):
            if name == "bake":
                step = ["bake", "--blend", retargeted, "--armature", record["armature"], "--out", baked,
                        "--metrics", metrics, "--json"] + (["--preset", job["preset"]] if job["preset"] else []) \
                    + ([] if job.get("project") is None else ["--project" if job["project"] else "--no-project"])
            if cancelled():
                return {"clip": clip, "cancelled": True}
            code, stdout, stderr = _run_child(command + step, cancelled)
            if code is None:
                # a bake stopped while Blender was exiting may have written its files: the
                # clip is in flight, so it leaves none (a finished clip is one reported)
                for path in (baked, metrics) if name == "bake" else ():
                    if os.path.exists(path):
                        os.remove(path)
                return {"clip": clip, "cancelled": True}
            result = _last_json(stdout)
            # exit 3 from bake: written, with the verdict 'failed' (its metrics say so)
            if code != 0 and not (name == "bake" and code == EXIT_VERDICT and "action" in result):
                err = stderr.strip().splitlines()
                record["error"] = result.get("error") or (err[-1] if err else f"{name} exited {code}")
                return record
            record.update({k: v for k, v in result.items() if k in ("armature", "action", "metrics")})
            record["warnings"] += list(result.get("warnings", ()))
    finally:
        if os.path.exists(retargeted):
            os.remove(retargeted)
        record["seconds"] = round(time.monotonic() - start, 3)
    record["out"], record["metrics_file"] = baked, metrics
    return record


class _Call:
    """f(*args) as a pickle payload: unpickling it makes the call (its __reduce__)."""

    def __init__(self, f, *args):
        self.f, self.args = f, args

    def __reduce__(self):
        return self.f, self.args


def _task(f, *args):
    """(pickle.loads, payload) for Client.submit: the scheduler and the workers deserialize
    the graph with the standard library only, and the payload (cloudpickle, this module's
    functions by value) runs f(*args) when the worker unpickles it. Submitting f directly
    would pickle it by reference to this add-on's module, which they cannot import."""
    import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return pickle.loads, cloudpickle.dumps(_Call(f, *args))


def _connect(request, scratch):
    """(client, cluster or None): a client of the scheduler at request.scheduler, or of a
    new local cluster of request.workers single-threaded processes whose temporary files
    (the scheduler file, Dask's worker spaces, the children's and Blender's own) all go
    into the folder `scratch`, so none outlives the batch however its processes end.
    Raises SignSimError.

    The local cluster's scheduler and workers are fresh `python -m dask spec` processes
    (distributed.deploy.subprocess.SubprocessCluster), as on a farm: LocalCluster's
    multiprocessing workers would re-import this process's main module and sys.path,
    where `bpy` cannot load a second time."""
    try:
        from distributed import Client
        from distributed.deploy.subprocess import SubprocessCluster
    except ImportError as ex:
        raise SignSimError(f"batch needs dask.distributed in this Python ({ex}): "
                           "pip install distributed, or run ./signsim batch") from None
    if request.scheduler:
        try:
            return Client(request.scheduler, timeout="10s"), None
        except (OSError, TimeoutError, ValueError) as ex:
            raise SignSimError(f"cannot reach the Dask scheduler at {request.scheduler}: {ex}") from None
    # the cluster's processes log to this stderr: only their errors
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    # Ctrl-C in a terminal signals the whole process group: the cluster's processes start
    # in their own session, so only this process sees it and cancels the tasks through the
    # batch's event (their children stop with SIGTERM and leave no partial files)
    subprocess_module = sys.modules[SubprocessCluster.__module__]
    subprocess_module.asyncio = _OwnSession(scratch)
    try:
        cluster = SubprocessCluster(n_workers=request.workers, threads_per_worker=1, dashboard_address=None,
                                    silence_logs=logging.ERROR,
                                    scheduler_kwargs={"scheduler_file": os.path.join(scratch, "scheduler.json")})
    except RuntimeError as ex:  # e.g. Windows, which SubprocessCluster does not support
        raise SignSimError(f"cannot start a local Dask cluster ({ex}): start one and pass --scheduler") from None
    return Client(cluster), cluster


class _OwnSession:
    """asyncio as distributed's SubprocessCluster sees it, but its processes start in a
    session of their own (a terminal's Ctrl-C does not reach them), with the folder
    `scratch` as their temporary folder (TMPDIR, inherited by their children)."""

    def __init__(self, scratch):
        self.scratch = scratch

    def __getattr__(self, name):
        return getattr(asyncio, name)

    def create_subprocess_exec(self, *args, **kwargs):
        return asyncio.create_subprocess_exec(*args, start_new_session=True,
                                              env={**os.environ, "TMPDIR": self.scratch}, **kwargs)


def _run_on_cluster(client, command, clips, job, report, parallel):
    """Submit one task per clip and collect the records in clip order, reporting each
    finished clip with the time left (clips_eta, `parallel` clips at once); on
    KeyboardInterrupt set the cancel event, wait for the running tasks to stop and raise
    KeyboardInterrupt('<k> of <n> clip(s) baked in <out>'), the clips kept."""
    from distributed import Event, as_completed
    from distributed.client import FutureCancelledError
    batch = uuid.uuid4().hex
    event = Event(f"signsim-cancel-{batch}", client=client)
    futures = {client.submit(*_task(run_clip, command, clip, job, event.name), key=f"signsim-{batch}-{i}",
                             pure=False): i for i, clip in enumerate(clips)}
    records = [None] * len(clips)

    def collect(future):
        i = futures[future]
        try:
            records[i] = future.result()
        except Exception as ex:  # the task itself failed (e.g. its worker died too often)
            records[i] = {"clip": clips[i], "warnings": [], "error": f"{type(ex).__name__}: {ex}"}
        r = records[i]
        done = sum(r is not None for r in records)
        left = clips_eta([r["seconds"] for r in records if r is not None and "seconds" in r],
                         len(clips) - done, parallel) if done < len(clips) else None
        report(INFO, f"[{done}/{len(clips)}] {r['clip']}: " + (f"FAILED {r['error']}" if "error" in r else
                                                                 f"baked, {r['metrics'].get('verdict')}")
               + (f", {eta_text(left)}" if left is not None else ""))

    try:
        for future in as_completed(futures):
            collect(future)
    except KeyboardInterrupt:
        event.set()
        try:
            from distributed import wait
            wait(list(futures), timeout=CANCEL_WAIT_S)
        except (TimeoutError, FutureCancelledError):
            pass
        # clips that finished before the interrupt keep their files: say so, or a user
        # reading the log re-runs them and finds outputs nobody reported
        for future in futures:
            if records[futures[future]] is None and future.status == "finished" and \
                    not future.result().get("cancelled"):
                collect(future)
        client.cancel(list(futures))
        baked = sum(r is not None and "error" not in r for r in records)
        raise KeyboardInterrupt(f"{baked} of {len(clips)} clip(s) baked in {job['out']}") from None
    return records


def bake_many(request: BatchRequest, report=silent) -> dict:
    """Retarget + bake every matching library clip, one Dask task per clip (a local
    cluster of request.workers processes, or the one at request.scheduler), each clip in
    its own child processes; reports the clips and the cluster's start first, then
    "[k/n] <clip>: baked, <verdict>|FAILED …[, eta 40 s]" as clips finish (the time left
    while clips remain: clips_eta over the finished clips' own times).
    Returns {"clips": [record], "out": folder}; records in library order, each with
    "clip", "warnings" (the retarget's and the bake's, each also reported as
    "<clip>: <warning>"), "seconds" (its wall seconds in its task) and either "error" or
    "armature", "action", "metrics", "out", "metrics_file".
    Raises SignSimError for a missing rig or library, no matching clip, a bad --out, an
    unreachable scheduler, or output files that would overwrite the rig, the library or
    each other (before any work); KeyboardInterrupt after cancelling the tasks, saying
    how many clips were baked before it and where."""
    args = replace(request, library=library.library_file(request.library), rig=os.path.abspath(request.rig),
                   out=os.path.abspath(request.out))
    if not os.path.isfile(args.rig):
        raise SignSimError(f"rig file not found: {args.rig}")
    if args.workers < 1:
        raise BadOption("--workers must be at least 1")
    fps = retarget.check_fps(args.fps)
    clips = [c["name"] for c in library.list_clips(args.library, text=args.text,
                                                   tags=library.parse_tags(args.tags))]
    if not clips:
        note = library.empty_note(args.library, args.text, ["--tags"] if args.tags else [])
        raise SignSimError(f"no clips to bake in {args.library}" + (f" ({note})" if note else ""))
    # before any work: no clip's files may be the rig, the library or another clip's files
    outputs = [(path, c) for c in clips for path in clip_outputs(c, args.out)]
    files.check_distinct([args.rig, args.library], [p for p, _ in outputs],
                         [f"clip '{c}'" for _, c in outputs])
    files.make_folder(args.out)
    command = cli_command()
    job = {"library": args.library, "rig": args.rig, "out": args.out, "armature": args.armature,
           "preset": args.preset, "project": args.project, "fps": fps}
    scratch = tempfile.mkdtemp(prefix="signsim-batch-")
    try:
        where = f"the Dask cluster at {args.scheduler}" if args.scheduler else f"{args.workers} local worker(s)"
        report(INFO, f"baking {len(clips)} clip(s) on {where} into {args.out}: {', '.join(clips)}")
        report(INFO, f"connecting to {args.scheduler}…" if args.scheduler else
               f"starting {args.workers} local worker(s)…")
        client, cluster = _connect(args, scratch)
        try:
            parallel = args.workers if cluster is not None else len(client.scheduler_info()["workers"])
            report(INFO, f"started: {min(parallel, len(clips))} clip(s) at a time, each retargeted then baked "
                         "in processes of its own")
            records = _run_on_cluster(client, command, clips, job, report, parallel)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for r in records:
        for w in r.get("warnings", ()):
            report(WARNING, f"{r['clip']}: {w}")
    return {"clips": records, "out": args.out}
