import json
import shutil

import pytest

from shardgen.model.target import BLOCK, ModelError, ModelInfo, weights_digest


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


def test_the_tokenizers_facts_are_read_from_the_cache_until_a_file_of_the_folder_changes(model_copy, tmp_path):
    """merge, report and `shardgen status` ask for the hashes, the end-of-turn and stop ids that prompts worked out:
    read from the results folder's cache, without loading the tokenizer (`shardgen status` on the demo model: 4.6 s
    before, 0.9-1.0 s after); a changed template file or a template in the config: worked out again; a cache that
    cannot be written: worked out, and no error."""
    cache = tmp_path / "results" / ".shardgen" / "model-cache.json"
    first = ModelInfo(model_copy, cache=cache)
    stop_ids = first.stop_token_ids  # as prompts asks: the end-of-turn id it is made of is kept too
    made = (first.fingerprint, first.end_of_turn_id, stop_ids)
    assert "tokenizer" in first.__dict__ and first.end_of_turn_id is not None
    assert json.loads(cache.read_text())["facts"] == dict(zip(("fingerprint", "end_of_turn_id", "stop_token_ids"),
                                                              made))
    again = ModelInfo(model_copy, cache=cache)
    assert (again.fingerprint, again.end_of_turn_id, again.stop_token_ids) == made
    assert "tokenizer" not in again.__dict__  # the cache, not the tokenizer

    config = json.loads((model_copy / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}"  # no end-of-turn token
    (model_copy / "tokenizer_config.json").write_text(json.dumps(config))
    edited = ModelInfo(model_copy, cache=cache)
    assert edited.fingerprint["template"] != made[0]["template"] and edited.end_of_turn_id is None
    uncached = ModelInfo(model_copy)
    assert (edited.fingerprint, edited.stop_token_ids) == (uncached.fingerprint, uncached.stop_token_ids)
    own = ModelInfo(model_copy, chat_template="{{ messages[0]['content'] }}", cache=cache)
    assert own.fingerprint["template"] not in (made[0]["template"], edited.fingerprint["template"])

    unwritable = tmp_path / "a-file" / "model-cache.json"  # its folder cannot be made: a file is there
    unwritable.parent.write_text("")
    assert ModelInfo(model_copy, cache=unwritable).fingerprint == edited.fingerprint
