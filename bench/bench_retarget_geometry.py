"""Every shared clip onto every target rig, judged by geometry only: the full sweep of
tests/retarget/test_retarget_geometry.py (9 clips x 5 rigs; the suite keeps CMU's walk on
each rig and fingerspelling on the signer and the robot).

    .venv/bin/python bench/bench_retarget_geometry.py [--log FILE]

Same checks and thresholds as the test (head above hips, chain cosines ≥ 0.98, palm
≤ 1.5°, chest ≤ 5°, jump excess ≤ 5°, root error ≤ 2 cm, clavicle rhythm 0.3–0.55
where the source's clavicle does not move,
planted feet slide ≤ 2 cm and stand within 1.5 cm, the Biped root and the robot's
fingers); with --log, one JSON line of numbers per pair (SIGNSIM_MEASURE_LOG).
Exits non-zero when any pair fails a check.
"""
import argparse
import os

import results
import sweep


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", help="append each pair's numbers as a JSON line to this file")
    args = ap.parse_args()
    if args.log:
        os.environ["SIGNSIM_MEASURE_LOG"] = os.path.abspath(args.log)
    return sweep.run("retarget/test_retarget_geometry.py")


if __name__ == "__main__":
    results.run(main)
