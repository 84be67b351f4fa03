"""tools/e2gan_readme_results.py: each job's CPU from its own process (a warm job's benchmark reads 0),
the notebook from its benchmark; the data-size caption from the table's steps; the ledger cut to its
columns."""
import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("e2gan_readme_results", REPO / "tools/e2gan_readme_results.py")
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)

HEAD = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def write_prov(path: Path, rule: str, wall: float, cpu: float, warm: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rule": rule, "process": {"cpu_s": cpu, "wall_s": wall, "warm": warm}}))


def test_job_costs_read_each_process_and_the_notebook_benchmark(tmp_path):
    root = tmp_path / "tiny" / "e2gan"
    write_prov(root / "metrics" / "rank_search.json.provenance.json", "e2gan_rank_search", 120.0, 101.5, True)
    write_prov(root / "metrics" / "base_clustered.json.provenance.json", "e2gan_base_model", 90.0, 80.25, False)
    # a warm job's benchmark measures its client: 0 CPU; the tool must not read it
    (root / "benchmarks").mkdir(parents=True)
    (root / "benchmarks" / "e2gan_rank_search.tsv").write_text(HEAD + "120\t0:02:00\t1\t0\t0\t0\t0\t0\t0\t0.0\n")
    (tmp_path / "tiny" / "benchmarks").mkdir(parents=True)
    (tmp_path / "tiny" / "benchmarks" / "paper_notebook@e2gan.tsv").write_text(
        HEAD + "20.5\t0:00:20\t1\t0\t0\t0\t0\t0\t0\t12.0\n")
    costs = {c["job"]: c for c in tool.job_costs(root, tmp_path / "tiny")}
    assert costs["rank_search"]["cpu_s"] == 101.5 and costs["rank_search"]["warm"]
    assert costs["base_clustered"]["cpu_s"] == 80.25 and not costs["base_clustered"]["warm"]
    assert costs["notebook"]["cpu_s"] == 12.0 and costs["notebook"]["wall_s"] == 20.5
    assert sum(c["cpu_s"] for c in costs.values()) == 101.5 + 80.25 + 12.0


def test_data_size_caption_states_the_steps_of_the_table(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "e2gan_data_size.csv").write_text(
        "method,m,steps,psnr,n_seeds\nkmeans,16,100,13.0,3\nkmeans,240,100,14.0,3\nrandom,16,100,13.1,3\n")
    caption = tool.data_size_caption(tmp_path)
    assert "100 steps per subset" in caption and "equal steps" in caption and "epochs" not in caption
    (tmp_path / "tables" / "e2gan_data_size.csv").write_text(
        "method,m,steps,psnr,n_seeds\nkmeans,16,7,13.0,3\nkmeans,240,100,14.0,3\n")
    assert "equal steps" not in tool.data_size_caption(tmp_path)


def test_ledger_rows_keep_the_paper_rows_and_columns():
    md = ("# Ledger\n\n| id | kind | claim | paper value | estimate | 90% interval | n | test | status | robust | "
          "floors | audit | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
          "| e2gan.storage | accounting | Bytes | 121 | 16.57 | exact | exact | `x` >= 10 | **PASS** | – | none | ok | n |\n"
          "| mmp.other | paper | c | – | 1 | [0, 2] | 3 seeds | `y` > 0 | **PASS** | – | none | ok | n |\n")
    rows = tool.ledger_rows(md)
    assert len(rows) == 3 and rows[0].startswith("| id | kind | estimate")
    assert rows[2] == "| e2gan.storage | accounting | 16.57 | exact | exact | `x` >= 10 | **PASS** | none | ok |"


def test_rank_rows_and_lr_line():
    rows = tool.rank_rows([{"layer": "up.up2", "group": "up", "rank": 8, "cap": 8, "params": 80},
                           {"layer": "up.head", "group": "up", "rank": 3, "cap": 3, "params": 30},
                           {"layer": "ds", "group": "ds", "rank": 2, "cap": 32, "params": 20}])
    assert rows[2] == "| up | up.up2: 8 / 8, up.head: 3 / 3 | 110 |" and rows[3] == "| ds | ds: 2 / 32 | 20 |"
    line = tool.lr_line({"chosen": {"full_ft": 1e-3}, "evaluations": {"full_ft": 4}, "at_edge": {"full_ft": True},
                         "n_at_edge": 1},
                        {"chosen": {"pix2pix_scratch": 1.73e-3}, "evaluations": {"pix2pix_scratch": 4},
                         "at_edge": {"pix2pix_scratch": False}, "n_at_edge": 0})
    assert "full_ft 0.001 (4 tried, at an edge)" in line and "pix2pix_scratch 0.00173 (4 tried)" in line
    assert line.endswith("1 of 2 arms.")


def test_data_size_line_reads_both_methods_at_each_m(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "e2gan_data_size.csv").write_text(
        "method,m,steps,psnr,fd,n_seeds\nkmeans,16,100,13.01,400,3\nkmeans,240,100,14.0,300,3\n"
        "random,16,100,13.2,410,3\nrandom,240,100,14.0,300,3\n")
    line = tool.data_size_line(tmp_path)
    assert "m = 16: 13.01 / 13.20 dB (`fd` 400 / 410)" in line and "m = 240: 14.00 / 14.00 dB" in line
