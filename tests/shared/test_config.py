import pytest

from shared.config import ConfigError, config_hash, load_config

YAML = """
defaults:
  seed: 0
  lr: 0.001
  use_ema: false
  model: {dim: 64, depth: 2}
  weights_path: null
  sizes: [1, 2]
profiles:
  smoke: {model: {dim: 8}}
  tiny: {}
  full: {model: {dim: 1024}, weights_path: /data/w}
"""


@pytest.fixture
def cfg_path(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(YAML)
    return path


def test_profiles_merge_over_defaults(cfg_path):
    smoke = load_config(cfg_path, "smoke")
    assert smoke.model.dim == 8 and smoke.model.depth == 2 and smoke.profile == "smoke"
    assert load_config(cfg_path, "full").weights_path == "/data/w"
    assert load_config(cfg_path, "tiny").model.dim == 64


def test_unknown_profile_lists_choices(cfg_path):
    with pytest.raises(ConfigError, match=r"unknown profile 'huge'.*smoke.*tiny.*full"):
        load_config(cfg_path, "huge")


def test_unknown_key_lists_valid_keys(cfg_path, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(YAML.replace("tiny: {}", "tiny: {model: {width: 3}}"))
    with pytest.raises(ConfigError, match=r"unknown key .*model.width.*valid keys here: \['depth', 'dim'\]"):
        load_config(bad, "tiny")


def test_wrong_type_is_refused(cfg_path):
    with pytest.raises(ConfigError, match=r"expected int .* got str"):
        load_config(cfg_path, "tiny", ["model.dim=big"])
    with pytest.raises(ConfigError, match=r"expected bool"):
        load_config(cfg_path, "tiny", ["use_ema=1"])


def test_int_accepted_for_float_and_overrides_apply(cfg_path):
    cfg = load_config(cfg_path, "tiny", ["lr=1", "model.depth=5", "sizes=[3, 4, 5]"])
    assert cfg.lr == 1 and cfg.model.depth == 5 and cfg.sizes == [3, 4, 5]


def test_unknown_profile_in_file_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("defaults: {a: 1}\nprofiles: {medium: {a: 2}}\n")
    with pytest.raises(ConfigError, match="unknown profile"):
        load_config(path, "tiny")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no config file"):
        load_config(tmp_path / "nope.yaml")


def test_config_hash_is_stable_and_sensitive(cfg_path):
    a, b = load_config(cfg_path, "tiny"), load_config(cfg_path, "tiny")
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash(load_config(cfg_path, "smoke"))


def test_every_shipped_config_loads_at_every_profile(repo):
    paths = sorted(repo.glob("papers/*/config.yaml")) + sorted((repo / "tests/fixtures/papers").glob("*/config.yaml"))
    assert paths, "no config files found"
    for path in paths:
        for profile in ("smoke", "tiny", "full"):
            assert load_config(path, profile).profile == profile


def test_closed_value_sets_are_checked_at_load(tmp_path):
    """A misspelt enum value stops at start-up (it used to fail hours later, where it was used)."""
    from shared.config import CHOICES

    path = tmp_path / "config.yaml"
    path.write_text("defaults: {logging: {wandb: disabled}, mode: a}\nchoices: {mode: [a, b]}\n"
                    "profiles: {smoke: {}, tiny: {}, full: {mode: b}}\n")
    assert load_config(path, "full").mode == "b"
    assert load_config(path, "tiny", ["logging.wandb=offline"]).logging.wandb == "offline"
    with pytest.raises(ConfigError, match=r"logging.wandb='offlne' is not one of"):
        load_config(path, "tiny", ["logging.wandb=offlne"])
    with pytest.raises(ConfigError, match=r"mode='c' is not one of \['a', 'b'\]"):
        load_config(path, "tiny", ["mode=c"])
    assert "trainer.precision" in CHOICES


def test_every_paper_config_passes_its_value_sets():
    from pathlib import Path

    from shared.config import PROFILES

    for config in sorted(Path(__file__).resolve().parents[2].glob("papers/*/config.yaml")):
        for profile in PROFILES:
            load_config(config, profile)
