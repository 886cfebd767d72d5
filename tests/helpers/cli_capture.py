"""Run SignSim's CLI handler in-process and capture what it printed."""


def run_cli(cli, capsys, argv):
    """cli(argv) with pytest's capsys: (exit code, stdout, stderr) of that call alone."""
    capsys.readouterr()
    code = cli(argv)
    out, err = capsys.readouterr()
    return code, out, err
