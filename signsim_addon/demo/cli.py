"""`signsim demo`: the main job on the bundled sample, end to end (demo.api.run_demo)."""
from ..errors import cli_reporter
from . import api


def add_arguments(parser):
    parser.add_argument("--out", metavar="DIR", default="signsim-demo",
                        help="folder for the files the demo writes (default: ./signsim-demo)")


def run(args, say) -> dict:
    return api.run_demo(api.DemoRequest(out=args.out), cli_reporter(say))
