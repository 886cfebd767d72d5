"""Run SignSim's CLI handler in-process and capture what it printed."""

import re


def run_cli(cli, capsys, argv):
    """cli(argv) with pytest's capsys: (exit code, stdout, stderr) of that call alone."""
    capsys.readouterr()
    code = cli(argv)
    out, err = capsys.readouterr()
    return code, out, err


PROGRESS = re.compile(r"\[\w+ \d+/\d+\] .*")


def without_progress(err):
    """stderr's lines without the progress lines a long step prints there under --json
    (`[compose 2/4] clips 43 % eta 12 s`): what is left is the command's own message."""
    return [line for line in err.strip().splitlines() if not PROGRESS.fullmatch(line)]
