"""Fixtures of the compose tests."""
import importlib

import pytest


@pytest.fixture(scope="module")
def cm(addon):
    """The compose capability's api module of the installed add-on."""
    return importlib.import_module(addon.__name__ + ".signsim_addon.compose.api")
