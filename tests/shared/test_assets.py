import pytest

from shared.assets import MissingAssetError, require_path
from shared.config import ConfigError


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


def test_cli_stops_on_a_missing_asset_with_one_line_and_exit_2(tmp_path, capsys):
    """Every paper's entry point goes through shared.experiment.cli: no traceback, exit status 2."""
    from shared.experiment import cli

    config = tmp_path / "config.yaml"
    config.write_text("defaults: {seed: 0}\nprofiles: {smoke: {}, tiny: {}, full: {}}\n")

    def needs_weights(run):
        require_path(tmp_path / "nope", what="InceptionV3 weights", fetch="pt_inception-2015-12-05",
                     config_key="metrics.inception_path")

    with pytest.raises(SystemExit) as stop:
        cli("toy", {"fid": needs_weights}, config, ["fid", "--profile", "smoke", "--out", str(tmp_path / "o")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("toy: No InceptionV3 weights") and "metrics.inception_path" in err[0]


@pytest.mark.parametrize("kind", ["config", "checkpoint"])
def test_cli_reports_config_and_checkpoint_errors_in_one_line_unless_debug(tmp_path, capsys, kind):
    """A bad override and an unreadable checkpoint stop like a missing input: one line, exit status 2;
    `--debug` shows the traceback instead."""
    from shared.experiment import cli
    from shared.training import CheckpointError

    config = tmp_path / "config.yaml"
    config.write_text("defaults: {seed: 0}\nprofiles: {smoke: {}, tiny: {}, full: {}}\n")

    def broken_checkpoint(run):
        raise CheckpointError("last.ckpt under c/ is truncated: delete it to start fresh")

    argv = ["train", "--profile", "smoke", "--out", str(tmp_path / "o")] + (["--set", "nope=1"] if kind == "config" else [])
    with pytest.raises(SystemExit) as stop:
        cli("toy", {"train": broken_checkpoint}, config, argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("toy: ")
    assert ("config error: unknown key" in err[0]) if kind == "config" else ("CheckpointError: last.ckpt" in err[0])
    with pytest.raises(ConfigError if kind == "config" else CheckpointError):
        cli("toy", {"train": broken_checkpoint}, config, argv + ["--debug"])
