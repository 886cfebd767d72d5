"""Real and generated hand clips retargeted onto three characters and baked: the sweep of
tests/bake/test_body.py's test_real_clips_bake_without_fallbacks_and_with_body_contact
over every clip × rig (the suite keeps one clip on each rig).

    .venv/bin/python bench/bench_body_clips.py

The test file run with SIGNSIM_SWEEP=1 (bench/sweep.py): each of the seven hand clips'
first 48 frames retargeted onto the bundled signer and the two shared glTF characters
(../shared/data) and baked with the default preset, checked as the test checks: 0
fallbacks, no joint-limit excess on the reference, no fallback or limit warning, face and
torso volumes found, hand–face and hand–torso contact pairs tested, finite rotations.
Exits with pytest's status: 1 when any case fails.
"""
import results
import sweep


def main():
    return sweep.run("bake/test_body.py", extra=["-k", "test_real_clips_bake_without_fallbacks_and_with_body_contact"])


if __name__ == "__main__":
    results.run(main)
