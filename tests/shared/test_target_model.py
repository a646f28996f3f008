import json
import shutil

import pytest

from shardgen.model.target import BLOCK, ModelError, weights_digest


@pytest.fixture
def model_copy(demo_model, tmp_path):
    return shutil.copytree(demo_model, tmp_path / "model")


def _flip_byte(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _data_start(path) -> int:
    return 8 + int.from_bytes(path.read_bytes()[:8], "little")


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_a_changed_weight_byte_changes_the_model_hash(model_copy, where):
    """The same file names and sizes (a fine-tune of the same shapes) with other weights: another hash, so no
    gen_key of the old weights is reused. Bytes in each sampled block: the start, the middle and the end."""
    weights = model_copy / "model.safetensors"
    before = weights_digest(model_copy)
    start, size = _data_start(weights), weights.stat().st_size
    offset = {"start": start, "middle": start + (size - start - BLOCK) // 2 + 5, "end": size - 1}[where]
    _flip_byte(weights, offset)
    assert weights.stat().st_size == size and weights_digest(model_copy) != before


def test_the_header_and_the_index_are_covered_and_a_byte_outside_the_blocks_is_not(model_copy):
    weights = model_copy / "model.safetensors"
    before = weights_digest(model_copy)
    start, size = _data_start(weights), weights.stat().st_size
    assert size - start > 3 * BLOCK + 2  # room for a byte in no sampled block
    _flip_byte(weights, start + BLOCK + 1)  # between the start and the middle block: not read (docs/outputs.md says so)
    assert weights_digest(model_copy) == before
    _flip_byte(weights, 8 + (start - 8) // 2)  # in the JSON header (tensor names, dtypes, shapes, offsets)
    changed = weights_digest(model_copy)
    assert changed != before
    (model_copy / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {}}))
    assert weights_digest(model_copy) != changed


def test_a_file_that_is_not_safetensors_is_named(model_copy):
    (model_copy / "model.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(ModelError, match="model.safetensors: not a safetensors file"):
        weights_digest(model_copy)
