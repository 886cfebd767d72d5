"""The one exception type SignSim raises for bad input or a refused action, and the
reporter protocol every use case takes.

A reporter is a callable `report(level, message)`: level is 'INFO', 'WARNING' or 'ERROR'
(Blender's operator report types, bpy.types.Operator.report), message one line.
"""

import contextlib
import difflib

INFO, WARNING, ERROR = 'INFO', 'WARNING', 'ERROR'


class SignSimError(Exception):
    """A problem the user can fix: bad file, wrong rig, missing bones, NaN keys.

    The message is one line, names the offending file/object, and says what is wrong.
    Operators report it as an error; the CLI prints it as one line on stderr and exits 1.
    """


class BadOption(SignSimError):
    """An option value that is malformed or out of its range (a frame range that is not
    FIRST:LAST, one value too many): a usage error, so the CLI exits 2 like argparse's own
    usage errors; operators report it as any SignSimError."""


@contextlib.contextmanager
def from_solver(prefix=""):
    """Re-raise the solver's ValueError (bad input: a skeleton, a preset, settings) as
    SignSimError at the add-on boundary, its message prefixed with `prefix`."""
    try:
        yield
    except ValueError as ex:
        raise SignSimError(f"{prefix}{ex}") from None


def did_you_mean(word, names):
    """"; did you mean 'a' or 'b'?" naming the existing `names` nearest to the unknown
    `word` (difflib.get_close_matches, any case), or "" when none is near. The one helper
    every typo message uses (clip names, tags, catalogs, armatures)."""
    by_lower = {}
    for n in sorted(set(names)):
        by_lower.setdefault(n.lower(), n)
    near = [by_lower[n] for n in difflib.get_close_matches(word.lower(), list(by_lower), n=3, cutoff=0.6)]
    if not near:
        return ""
    quoted = [f"'{n}'" for n in near]
    return "; did you mean " + (quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]) + "?"


def silent(level, message):
    """The reporter that drops every message."""


def cli_reporter(say):
    """A reporter printing through `say(line)`: INFO as it is, others prefixed 'warning: '
    or 'error: '. WARNING messages are also appended to `say.warnings` when `say` has that
    list (the CLI's, which puts them in the --json 'warnings')."""
    def report(level, message):
        if level == WARNING and isinstance(getattr(say, "warnings", None), list):
            say.warnings.append(message)
        say(message if level == INFO else f"{level.lower()}: {message}")
    return report


def operator_reporter(operator):
    """A reporter forwarding to bpy.types.Operator.report."""
    return lambda level, message: operator.report({level}, message)


@contextlib.contextmanager
def window_progress(context, label):
    """A progress callable (signsim_addon/progress.py) for an operator's use case:
    Blender's progress bar shows the task's fraction (progress.overall; it never goes back
    when a stage runs again) and the status bar '<label>: <stage> 43 %'; both are cleared
    when the block ends."""
    from .progress import overall
    wm, workspace = context.window_manager, context.workspace
    wm.progress_begin(0, 100)
    shown = [0]

    def progress(stage, k, n, fraction):
        shown[0] = max(shown[0], int(100 * overall(k, n, fraction)))
        wm.progress_update(shown[0])
        if workspace is not None:
            workspace.status_text_set(f"{label}: {stage} {100 * fraction:.0f} %")
    try:
        yield progress
    finally:
        wm.progress_end()
        if workspace is not None:
            workspace.status_text_set(None)
