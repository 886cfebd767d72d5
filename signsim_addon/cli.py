"""The command line: `blender -b -c signsim <subcommand> …` and `./signsim <subcommand> …`.

One handler, `main(argv)`, serves both (Blender API: bpy.utils.register_cli_command).
Each subcommand is a module function `run(args, say) -> dict`; `say` prints a human line
(silenced by --json), and the returned dict is printed as one JSON object on the last
stdout line when --json is given, with every warning the command reported
(errors.cli_reporter(say)) in its 'warnings' list. Errors exit non-zero with one line on
stderr. Blender's own log lines (files.quiet) never reach stdout.
"""
import argparse
import contextlib
import json
import signal
import sys
import traceback

import bpy

from .errors import BadOption, SignSimError

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    # argparse would print the usage block and call sys.exit(); one line is the contract.
    def error(self, message):
        raise _UsageError(f"{self.prog}: {message} (see --help)")


def _commands():
    """(name, help, add_arguments, run) for every subcommand, in --help order."""
    from .bake import cli as bake_cli
    from .compose import cli as compose_cli
    from .demo import cli as demo
    from .library import cli as library_cli
    from .resolve import cli as resolve_cli
    from .retarget import cli as retarget_cli
    return (
        ("demo", "run the main job on the bundled sample and print a summary",
         demo.add_arguments, demo.run),
        ("import", "import BVH/FBX/glTF clips into the motion library",
         library_cli.add_import_arguments, library_cli.run_import),
        ("list", "search and list the clips of a motion library",
         library_cli.add_list_arguments, library_cli.run_list),
        ("tag", "add or remove tags of a library clip",
         library_cli.add_tag_arguments, library_cli.run_tag),
        ("rig", "rig import CHARACTER --out RIG.blend: a character from an FBX/glTF file saved as a rig file",
         library_cli.add_rig_arguments, library_cli.run_rig),
        ("retarget", "retarget clips onto a rig",
         retarget_cli.add_arguments, retarget_cli.run),
        ("bake", "bake the physics pass onto an armature's keyframes",
         bake_cli.add_arguments, bake_cli.run),
        ("batch", "retarget and bake many library clips in parallel",
         bake_cli.add_batch_arguments, bake_cli.run_batch),
        ("compose", "splice clips into one action with transitions",
         compose_cli.add_arguments, compose_cli.run),
        ("resolve", "move the joints the least so that no body part is inside another",
         resolve_cli.add_arguments, resolve_cli.run),
    )


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser for all subcommands (also used to print --help)."""
    parser = _Parser(prog="signsim", description="SignSim: clean, physically plausible "
                     "keyframes for signing and gesturing characters.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true",
                        help="print one JSON object as the last line of stdout")
    common.add_argument("--debug", action="store_true",
                        help="print a traceback for unexpected errors")
    sub = parser.add_subparsers(dest="command", metavar="<subcommand>", parser_class=_Parser)
    for name, help_text, add_arguments, run in _commands():
        p = sub.add_parser(name, help=help_text, description=help_text, parents=[common])
        add_arguments(p)
        p.set_defaults(run=run)
    return parser


def main(argv) -> int:
    """Run one subcommand; returns the process exit code (0 ok, 1 error, 2 usage; import:
    3 when some clips were imported and some files failed).

    argv: the arguments after `-c signsim` (a list of str). Never raises.
    """
    parser = build_parser()
    want_json = "--json" in argv
    try:
        try:
            args = parser.parse_args(list(argv))
        except SystemExit as ex:  # --help
            return int(ex.code or 0)
        if args.command is None:
            parser.print_help()
            return _fail("signsim: a subcommand is required (see --help)", EXIT_USAGE, want_json)
        say = _Say(args.json)
        with _terminate_as_interrupt():
            result = args.run(args, say)
    except _UsageError as ex:
        return _fail(str(ex), EXIT_USAGE, want_json)
    except BadOption as ex:
        return _fail(f"signsim {args.command}: {ex} (see --help)", EXIT_USAGE, want_json)
    except (SignSimError, OSError, ValueError) as ex:
        return _fail(f"signsim: error: {ex}", EXIT_ERROR, want_json)
    except KeyboardInterrupt as ex:  # its text, if any, says what was kept
        return _fail("signsim: interrupted" + (f"; {ex}" if str(ex) else ""), EXIT_INTERRUPTED, want_json)
    except Exception as ex:  # a bug: still one line unless --debug asks for more
        if interrupted(ex):
            return _fail("signsim: interrupted", EXIT_INTERRUPTED, want_json)
        if "--debug" in argv:
            traceback.print_exc()
        return _fail(f"signsim: internal error: {type(ex).__name__}: {ex}", EXIT_ERROR, want_json)
    # A subcommand may ask for a non-zero exit (e.g. import: some files failed) while
    # still printing its full result; it has already written its summary line to stderr.
    code = result.pop("_exit", 0) if isinstance(result, dict) else 0
    if isinstance(result, dict):
        result["warnings"] = list(dict.fromkeys(list(result.get("warnings", [])) + say.warnings))
    if args.json:
        _print_json(result)
    return code


def interrupted(ex) -> bool:
    """True when Ctrl-C (or SIGTERM) caused `ex`: an interrupt that arrives while compiled
    code runs (a numba kernel) surfaces as SystemError "returned a result with an exception
    set" whose __cause__ (or __context__) is the KeyboardInterrupt (CPython's
    _Py_CheckFunctionResult)."""
    seen = set()
    while ex is not None and id(ex) not in seen:
        if isinstance(ex, KeyboardInterrupt):
            return True
        seen.add(id(ex))
        ex = ex.__cause__ or ex.__context__
    return False


class _Say:
    """Print one human line (nothing with --json); `warnings` collects the command's
    warnings (see errors.cli_reporter)."""

    def __init__(self, silent):
        self.silent = silent
        self.warnings = []

    def __call__(self, *parts):
        if not self.silent:
            print(*parts, flush=True)


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM raises KeyboardInterrupt like Ctrl-C, so an interrupted command unwinds
    through its `finally` blocks and leaves no temporary files (Python's signal module)."""
    def on_term(signum, frame):
        raise KeyboardInterrupt
    try:
        old = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread: leave the signal alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _fail(message, code, want_json):
    message = " ".join(str(message).split())
    if want_json:
        _print_json({"error": message})
    print(message, file=sys.stderr, flush=True)
    return code


def _print_json(obj):
    sys.stdout.flush()
    print(json.dumps(obj, sort_keys=True), flush=True)


_handle = None


def register():
    global _handle
    _handle = bpy.utils.register_cli_command("signsim", main)


def unregister():
    global _handle
    bpy.utils.unregister_cli_command(_handle)
    _handle = None
