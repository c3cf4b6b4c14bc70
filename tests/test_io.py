"""The atomic writers: a killed writer never leaves a half-written result."""

import json

import numpy as np
import pytest

from tcrformer.core import io


def test_write_json_is_canonical_and_rejects_nan(tmp_path):
    path = tmp_path / "v.json"
    io.write_json(path, {"b": np.float64(0.5), "a": np.arange(3)})
    assert path.read_text() == '{\n  "a": [\n    0,\n    1,\n    2\n  ],\n  "b": 0.5\n}\n'
    with pytest.raises(ValueError, match="non-finite"):
        io.write_json(path, {"x": float("nan")})
    assert json.loads(path.read_text())["b"] == 0.5  # the old file is untouched


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "a.txt"
    io.write_text(path, "old")
    with pytest.raises(RuntimeError), io.atomic_path(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_stale_temporaries_of_a_killed_writer_are_cleaned_up(tmp_path):
    (tmp_path / ".a.txt.abc123.tmp").write_text("litter")
    io.write_text(tmp_path / "a.txt", "new")
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_unreadable_files_name_the_file(tmp_path):
    bad = tmp_path / "values.json"
    bad.write_text("{not json")
    with pytest.raises(io.ResultFileError, match="values.json: not valid JSON"):
        io.read_json(bad)
    npy = tmp_path / "x.npy"
    npy.write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(io.ResultFileError, match="x.npy"):
        io.read_npy(npy)
    with pytest.raises(io.ResultFileError, match="file not found"):
        io.read_json(tmp_path / "missing.json")


def test_npy_round_trip_without_pickle(tmp_path):
    a = np.arange(12.0).reshape(3, 4)
    io.write_npy(tmp_path / "a.npy", a)
    np.testing.assert_array_equal(io.read_npy(tmp_path / "a.npy"), a)


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_results_get_the_mode_the_umask_gives_a_new_file(tmp_path, umask, mode):
    import os
    import stat

    old = os.umask(umask)
    try:
        io.write_text(tmp_path / "a.txt", "x")
        io.write_json(tmp_path / "b.json", {"a": 1})
    finally:
        os.umask(old)
    for name in ("a.txt", "b.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name


def test_the_folder_is_flushed_after_the_rename(tmp_path, monkeypatch):
    """A rename is durable only once its folder is on disk: fsync on the folder, after it."""
    import os

    events = []
    real_replace, real_fsync = os.replace, os.fsync
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("rename"), real_replace(a, b)))

    def fsync(fd):
        kind = "folder" if os.path.isdir(f"/proc/self/fd/{fd}") else "file"
        events.append(f"fsync {kind}")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    io.write_text(tmp_path / "a.txt", "x")
    assert events == ["fsync file", "rename", "fsync folder"]
