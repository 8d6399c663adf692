import pytest

from quicktrain.atomic import atomic_write, atomic_write_text


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "summary.json"
    atomic_write_text(target, "old")

    def broken(f):
        f.write(b"half of the new cont")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, broken)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_write_creates_folders(tmp_path):
    atomic_write_text(tmp_path / "a" / "b.txt", "x")
    assert (tmp_path / "a" / "b.txt").read_text() == "x"
