import numpy as np
import pytest

from shared.io import atomic_path, read_json, write_json


def test_write_json_roundtrip_numpy(tmp_path):
    path = write_json(tmp_path / "sub" / "m.json", {"a": np.float32(1.5), "b": np.arange(3)})
    assert read_json(path) == {"a": 1.5, "b": [0, 1, 2]}


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "m.json"
    write_json(path, {"ok": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(path) as tmp:
            tmp.write_text("{half")
            raise RuntimeError("killed mid-write")
    assert read_json(path) == {"ok": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_unserialisable_object_fails_without_clobbering(tmp_path):
    path = write_json(tmp_path / "m.json", {"ok": 1})
    with pytest.raises(TypeError):
        write_json(path, {"bad": object()})
    assert read_json(path) == {"ok": 1}
