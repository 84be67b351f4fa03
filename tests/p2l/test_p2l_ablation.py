"""The ablation (`ablation`): the variants the claims read on every prior, grouped by prior; the rest on prior 0."""
import importlib
from pathlib import Path

from shared.config import load_config
from shared.experiment import Run
from shared.io import write_json

from test_p2l_solver import tiny_ldm

A = importlib.import_module("papers.p2l.experiments.ablation")   # the package exports the function of that name

CONFIG = Path(__file__).resolve().parents[2] / "papers" / "p2l" / "config.yaml"
P2L = {"prompt_lr": 0.01, "prompt_steps": 1.0, "tau": 1.0, "lam": 1e-4}


def test_the_claimed_variants_run_on_every_prior_with_its_own_tuning(tmp_path, monkeypatch):
    cfg = load_config(CONFIG, "smoke", ["solve.steps=2", "data.n_val=1", "ablation.n=2", "tuning.extend=0"])
    assert cfg.priors == 2
    ldms = [tiny_ldm(), tiny_ldm(1)]
    monkeypatch.setattr(A, "load_prior", lambda cfg_, out_, prior=0: ldms[prior])
    monkeypatch.setattr(A, "load_classifier", lambda cfg_, out_: None)
    (tmp_path / "metrics").mkdir()
    write_json(tmp_path / "metrics" / "main_sr.json", {"methods": {
        "ldps": {"tuned_by_prior": [{"rho": 0.25}, {"rho": 0.5}]},
        "p2l": {"tuned_by_prior": [{**P2L, "rho": 0.75}, {**P2L, "rho": 1.5}]}}})
    seen = []
    real = A._solve_batches

    def spy(method, y, op, ldm, *a, **kw):
        if len(y) == 2:   # a test solve (the tuning solves the one validation image)
            seen.append((ldms.index(ldm), method, float(kw["rho"])))
        return real(method, y, op, ldm, *a, **kw)

    monkeypatch.setattr(A, "_solve_batches", spy)
    res = A.ablation(Run("p2l", "ablation", cfg, tmp_path))
    every = {"ldps", "prompt_only", "projection_only", "p2l"}
    assert set(res["every_prior"]) == every
    assert [(p, m) for p, m, _ in seen] == (
        [(0, m) for m in ("ldps", "p2l_prompt_only", "p2l_projection_only", "p2l", "p2l_glue", "p2l", "p2l")]
        + [(1, m) for m in ("ldps", "p2l_prompt_only", "p2l_projection_only", "p2l")])
    assert [r for p, m, r in seen if m in ("ldps", "p2l")][:2] == [0.25, 0.75]
    assert [r for p, m, r in seen if p == 1 and m in ("ldps", "p2l")] == [0.5, 1.5]   # prior 1's own tuning
    for name, v in res["variants"].items():
        ssim = v["ssim"]
        if name in every:
            assert ssim["n"] == 4 and ssim["groups"] == [0, 0, 1, 1] and ssim["group_unit"] == "prior"
            assert len(v["rho_by_prior"]) == 2
        else:
            assert ssim["n"] == 2 and "groups" not in ssim and len(v["rho_by_prior"]) == 1
    assert res["best_single"]["variant"] in ("prompt_only", "projection_only")


def test_ldps_and_p2l_are_read_from_the_main_table_where_it_solved_the_same_problems(tmp_path, monkeypatch):
    cfg = load_config(CONFIG, "smoke", ["solve.steps=2", "data.n_val=1", "data.noise_seeds=1", "data.n_test=2",
                                        "ablation.n=2", "tuning.extend=0"])
    ldms = [tiny_ldm(), tiny_ldm(1)]
    monkeypatch.setattr(A, "load_prior", lambda cfg_, out_, prior=0: ldms[prior])
    monkeypatch.setattr(A, "load_classifier", lambda cfg_, out_: None)
    (tmp_path / "metrics").mkdir()
    from shared.samples import sample
    grouped = lambda v: sample(v, "image", groups=[0, 0, 1, 1], group_unit="prior")
    main = {m: {"tuned_by_prior": [{**(P2L if m == "p2l" else {}), "rho": 1.0}] * 2, "nfe": 40,
                "wall_s": sample([1.0, 2.0], "seed"),
                **{k: grouped([i + 0.1 * j for j in range(4)]) for i, k in enumerate(A.SCORES) if k != "caption_top1"}}
            for m in ("ldps", "p2l")}
    write_json(tmp_path / "metrics" / "main_sr.json", {"methods": main})
    solved = []
    real = A._solve_batches
    monkeypatch.setattr(A, "_solve_batches", lambda m, y, *a, **kw: (solved.append(m) if len(y) == 2 else None)
                        or real(m, y, *a, **kw))
    res = A.ablation(Run("p2l", "ablation", cfg, tmp_path))
    assert "ldps" not in solved and "p2l" in solved   # P2L's name also runs the K and τ variants
    assert solved.count("p2l") == 2                     # those two, on prior 0
    for m in ("ldps", "p2l"):
        v = res["variants"][m]
        assert v["ssim"]["values"] == main[m]["ssim"]["values"] and v["ssim"]["groups"] == [0, 0, 1, 1]
        assert v["off_range"]["values"] == main[m]["off_range"]["values"] and v["nfe"] == 40
