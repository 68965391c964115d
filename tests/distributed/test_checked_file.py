import pytest
import torch

from featgraph.distributed.checked_file import (
    digest_file,
    read_verified,
    read_with_digest,
    write_atomically,
    write_text_atomically,
    write_with_digest,
)


def test_round_trip_with_its_digest(tmp_path):
    path = tmp_path / "state.pt"
    payload = {"w": torch.randn(3, 4), "step": 7, "names": ["a", "b"]}
    digest = write_atomically(path, payload)
    loaded = read_verified(path, "rewrite it", digest)
    assert torch.equal(loaded["w"], payload["w"]) and loaded["step"] == 7 and loaded["names"] == ["a", "b"]
    assert read_verified(path, "rewrite it")["step"] == 7  # no digest recorded: read as it is
    assert [p.name for p in tmp_path.iterdir()] == ["state.pt"]


def test_a_failed_write_leaves_the_previous_file(tmp_path):
    path = tmp_path / "state.pt"
    write_atomically(path, {"step": 1})

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("cannot pickle")

    with pytest.raises(RuntimeError, match="cannot pickle"):
        write_atomically(path, {"step": 2, "bad": Unpicklable()})
    assert read_verified(path, "x")["step"] == 1


def test_damaged_missing_and_unsafe_files_are_named(tmp_path):
    path = tmp_path / "state.pt"
    digest = write_atomically(path, {"w": torch.ones(100)})
    data = path.read_bytes()
    path.write_bytes(data[:-50])
    with pytest.raises(ValueError, match=r"state.pt' is damaged: its contents differ.*; rewrite it"):
        read_verified(path, "rewrite it", digest)
    with pytest.raises(ValueError, match=r"state.pt' is damaged: not a file featgraph wrote.*; rewrite it"):
        read_verified(path, "rewrite it")
    torch.save({"f": print}, path)  # loads only without weights_only: refused, with no advice to drop it
    with pytest.raises(ValueError, match="not a file featgraph wrote") as caught:
        read_verified(path, "rewrite it")
    assert "weights_only" not in str(caught.value)
    with pytest.raises(FileNotFoundError, match="gone.pt' is missing; rewrite it"):
        read_verified(tmp_path / "gone.pt", "rewrite it")


def test_text_is_written_whole(tmp_path):
    path = tmp_path / "meta.json"
    write_text_atomically(path, "{}")
    write_text_atomically(path, '{"a": 1}')
    assert path.read_text() == '{"a": 1}' and [p.name for p in tmp_path.iterdir()] == ["meta.json"]


def test_a_digest_beside_the_file_catches_what_loading_would_not(tmp_path):
    path = tmp_path / "checkpoint.pt"
    write_with_digest(path, {"w": torch.arange(64.0)})
    assert digest_file(path).is_file() and torch.equal(read_with_digest(path, "x")["w"], torch.arange(64.0))
    data = bytearray(path.read_bytes())
    data[-300] ^= 1  # inside the tensor's bytes
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="contents differ from what was written; x"):
        read_with_digest(path, "x")
    digest_file(path).unlink()  # no digest recorded: read as it is
    assert read_with_digest(path, "x")["w"].numel() == 64
