"""The one exception type SignSim raises for bad input or a refused action."""


class SignSimError(Exception):
    """A problem the user can fix: bad file, wrong rig, missing bones, NaN keys.

    The message is one line, names the offending file/object, and says what is wrong.
    Operators report it as an error; the CLI prints it as one line on stderr and exits 1.
    """
