"""`signsim demo`: run the main job on the bundled sample."""

from .samples import SAMPLES


def add_arguments(parser):
    parser.add_argument("--out", metavar="DIR", help="folder for the files the demo writes")


def run(args, say) -> dict:
    files = sorted(p.name for p in SAMPLES.iterdir() if p.suffix in {".blend", ".bvh"})
    say("SignSim demo: bundled sample files:", ", ".join(files) or "none")
    return {"samples": files}
