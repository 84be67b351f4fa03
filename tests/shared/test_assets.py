import pytest

from shared.assets import MissingAssetError, require_path


def test_missing_path_names_what_and_where(tmp_path):
    target = tmp_path / "sd15"
    with pytest.raises(MissingAssetError) as err:
        require_path(target, what="Stable Diffusion v1.5 weights", fetch="runwayml/stable-diffusion-v1-5",
                     config_key="full.sd_path")
    msg = str(err.value)
    assert str(target) in msg and "stable-diffusion-v1-5" in msg and "full.sd_path" in msg
    assert "\n" not in msg


def test_unset_path(tmp_path):
    with pytest.raises(MissingAssetError, match="No path set for UNI features.*data.features_dir"):
        require_path(None, what="UNI features", fetch="UNI patch features (.h5)", config_key="data.features_dir")


def test_existing_path_returned(tmp_path):
    assert require_path(tmp_path, what="x", fetch="x", config_key="x") == tmp_path
