"""An experiment run before the ones whose outputs it reads stops at start-up with one line naming
what to run (exit 2), declared (`needs`) or not."""
import json

import pytest

from shared.experiment import cli, needs

CONFIG = "defaults: {seed: 0}\nprofiles: {smoke: {}, tiny: {}, full: {}}\n"


def _experiments(tmp_path, calls):
    def main(run):
        calls.append("main")
        return {"score": 1.0}

    @needs("main")
    def ablation(run):   # declared: checked before anything runs
        calls.append("ablation")
        return json.loads((run.out / "metrics/main.json").read_text())

    def table(run):      # undeclared: the read itself fails
        calls.append("table")
        return json.loads((run.out / "metrics/main.json").read_text())

    return {"main": main, "ablation": ablation, "table": table}


@pytest.mark.parametrize("experiment", ["ablation", "table"])
def test_reading_an_unwritten_output_stops_with_one_line(tmp_path, capsys, experiment):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    calls: list[str] = []
    out = tmp_path / "o"
    with pytest.raises(SystemExit) as stop:
        cli("toy", _experiments(tmp_path, calls), config, [experiment, "--profile", "full", "--out", str(out)])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"toy: {experiment} reads " in err[0] and "main.json" in err[0]
    assert f"python -m papers.toy main --profile full --out {out}" in err[0]
    assert calls == ([] if experiment == "ablation" else ["table"])   # the declared input: before any work


def test_inputs_written_earlier_in_the_same_call_or_before_are_fine(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    calls: list[str] = []
    exps = _experiments(tmp_path, calls)
    argv = ["--profile", "smoke", "--out", str(tmp_path / "o")]
    cli("toy", exps, config, ["main", "ablation"] + argv)
    cli("toy", exps, config, ["table"] + argv)
    assert calls == ["main", "ablation", "table"]


def test_other_missing_files_keep_their_traceback(tmp_path):
    """Only the outputs folder's files are the user's to make; a missing file elsewhere is a bug."""
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)

    def broken(run):
        return json.loads((tmp_path / "elsewhere.json").read_text())

    with pytest.raises(FileNotFoundError):
        cli("toy", {"x": broken}, config, ["x", "--profile", "smoke", "--out", str(tmp_path / "o")])


def test_preflight_stops_before_any_experiment(tmp_path, capsys):
    """A dependency the last step needs (e.g. LPIPS's torchvision) is checked before hours of work."""
    from shared.config import ConfigError

    config = tmp_path / "config.yaml"
    config.write_text("defaults: {seed: 0, lpips: true}\nprofiles: {smoke: {}, tiny: {}, full: {}}\n")
    calls: list[str] = []

    def check(cfg, names):
        if cfg.lpips:
            raise ConfigError("lpips needs torchvision, which does not import here; set lpips=false")

    def tune(run):
        calls.append("tune")
        return {}

    with pytest.raises(SystemExit) as stop:
        cli("toy", {"tune": tune}, config, ["tune", "--profile", "full", "--out", str(tmp_path / "o")], preflight=check)
    assert stop.value.code == 2 and calls == []
    assert capsys.readouterr().err.strip() == ("toy: config error: lpips needs torchvision, which does not "
                                               "import here; set lpips=false")
    cli("toy", {"tune": tune}, config, ["tune", "--profile", "full", "--out", str(tmp_path / "o"),
                                        "--set", "lpips=false"], preflight=check)
    assert calls == ["tune"]
