"""The soft-face bake tests' shared input, retargeted once per worker process."""
import pytest
from softface_clips import CHEEK, SAMPLES, window


@pytest.fixture(scope="module")
def chin(addon, tmp_path_factory):
    """The cheek press of chin_cheek.bvh retargeted onto the bundled signer (read only)."""
    tmp = tmp_path_factory.mktemp("softface_bake")
    window(SAMPLES / "chin_cheek.bvh", tmp / "cheek.bvh", *CHEEK)
    rig = tmp / "chin.blend"
    assert addon.signsim_addon.cli.main(["retarget", "--clip", str(tmp / "cheek.bvh"),
                                         "--rig", str(SAMPLES / "signer.blend"), "--out", str(rig)]) == 0
    return rig
