"""`signsim demo`: the main job on the bundled sample, end to end (demo.api.run_demo)."""
from ..errors import cli_reporter
from ..progress import cli_lines
from . import api


def add_arguments(parser):
    parser.add_argument("--out", metavar="DIR", default="signsim-demo",
                        help="folder for the files the demo writes (default: ./signsim-demo)")
    parser.add_argument("--force", action="store_true",
                        help="replace the demo's files in --out when they are already there")


def run(args, say) -> dict:
    return api.run_demo(api.DemoRequest(out=args.out, force=args.force), cli_reporter(say),
                        progress=cli_lines(say, "demo"))
