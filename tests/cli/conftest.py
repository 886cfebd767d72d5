"""The CLI tests' handler: SignSim's `main(argv)` of the enabled add-on."""
import pytest


@pytest.fixture
def cli(addon):
    return addon.signsim_addon.cli.main
