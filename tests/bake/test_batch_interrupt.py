"""`signsim batch` interrupted: SIGTERM, or Ctrl-C to its process group, cancels the
tasks, ends every child process and leaves only the clips finished before the signal: no
lock or scheduler file, no temporary folder (Dask's worker spaces included)."""
import os
import re
import signal
import subprocess
import time

import psutil
import pytest

from batch_library import LAUNCHER, RIG, make_library, only_finished_outputs


@pytest.fixture(scope="module")
def library4(addon, tmp_path_factory):
    """A library of four short, distinct clips: more clips than workers, so an interrupted
    batch has clips finished, running and not started."""
    return make_library(addon, tmp_path_factory.mktemp("batch4"), (("fingerspelling", 12), ("fingerspelling", 18),
                                                                ("chin_cheek", 12), ("chin_cheek", 18)))


@pytest.mark.slow
@pytest.mark.parametrize("how", ("SIGTERM", "Ctrl-C", "SIGTERM after a clip"))
def test_sigterm_cancels_the_tasks_and_leaves_no_partial_output(library4, tmp_path, how):
    """SIGTERM to the batch, or SIGINT to its whole process group (what a terminal's Ctrl-C
    sends: it used to kill the cluster's own processes, leaving .retargeted files); and
    SIGTERM once a clip's files are written (that clip used to go unreported)."""
    out, temp, cwd = tmp_path / "out", tmp_path / "tmp", tmp_path / "cwd"
    temp.mkdir()
    cwd.mkdir()
    library_files = sorted(os.listdir(library4.parent))
    proc = subprocess.Popen(LAUNCHER + ["batch", "--library", str(library4), "--rig", RIG, "--out", str(out),
                                        "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, cwd=cwd, env=dict(os.environ, TMPDIR=str(temp)))
    batch = psutil.Process(proc.pid)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # until a bake is under way
        assert proc.poll() is None, proc.communicate()
        try:
            if how == "SIGTERM after a clip":  # its files written and its bake process gone
                written = [str(out / n) for n in os.listdir(out) if n.endswith(".json")] if out.is_dir() else []
                if any(not any(w in p.cmdline() for p in batch.children(recursive=True)) for w in written):
                    break
            elif any("bake" in p.cmdline() for p in batch.children(recursive=True)):
                break
        except psutil.Error:
            pass
        time.sleep(0.05)
    else:
        pytest.fail("no bake started")
    descendants = batch.children(recursive=True)
    if how.startswith("SIGTERM"):
        proc.send_signal(signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGINT)
    stdout, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    # progress lines "[k/n] <clip>: baked, <verdict>[, eta 12 s]"
    reported = {m.group(1) for m in (re.fullmatch(r"\[\d+/\d+\] (.+): baked, (ok|check|failed)(, eta .+)?", line)
                                     for line in stdout.splitlines()) if m}
    gone, alive = psutil.wait_procs(descendants, timeout=60)
    assert not alive, [p.pid for p in alive]
    # clips finished before the signal keep both files; the interrupted ones left nothing
    finished = only_finished_outputs(out)
    assert len(finished) < 4 and finished == reported, (finished, stdout)
    # the last line says how many clips were kept, and where
    assert err.strip().splitlines()[-1] == f"signsim: interrupted; {len(finished)} of 4 clip(s) baked in {out}", err
    assert finished or how != "SIGTERM after a clip"
    # nothing else left behind: the temporary folder (where Dask puts its worker spaces and
    # the children their files), the working folder and the library's folder as they were
    assert [str(p) for p in temp.rglob("*")] == [] and [str(p) for p in cwd.rglob("*")] == []
    assert sorted(os.listdir(library4.parent)) == library_files
