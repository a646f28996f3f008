"""Build the demo's tiny hybrid model: a NemotronH (Mamba2 + attention + MLP) with seeded random weights and a
byte-level BPE tokenizer trained on a shipped corpus. Its output is gibberish; the mechanics are real."""

import json
import random
from pathlib import Path

from shardgen.store.atomic import write_text

# ChatML: one end-of-turn token (<|im_end|>) that the template emits after every turn.
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 2048
PATTERN = "M*M-"  # Mamba2, attention, Mamba2, MLP
# The demo's sampling as served, as a released model's generation_config.json gives it (Qwen3's values), so the demo
# runs the path a real target takes: a config that leaves sampling out gets these.
SERVED_SAMPLING = {"do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20}


def model_config() -> dict:
    # The field names are what both transformers and SGLang read (SGLang needs n_groups and the pattern). Head,
    # state and group sizes follow the Nemotron-H family's (SGLang's kernels are tuned for them); bf16 for SGLang,
    # the CPU engine loads it as float32.
    return {
        "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "vocab_size": VOCAB_SIZE,
        "tie_word_embeddings": False, "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": len(PATTERN), "hybrid_override_pattern": PATTERN, "num_attention_heads": 2,
        "head_dim": 128, "num_key_value_heads": 2, "mlp_hidden_act": "relu2", "attention_bias": False,
        "mlp_bias": False, "use_bias": False, "initializer_range": 0.02, "layer_norm_epsilon": 1e-5,
        "residual_in_fp32": False, "use_cache": True, "num_logits_to_keep": 1, "pad_token_id": 0,
        "bos_token_id": 1, "eos_token_id": 2, "sliding_window": None, "max_position_embeddings": 4096,
        "attention_dropout": 0.0, "hidden_dropout": 0.0, "ssm_state_size": 128,
        "mamba_num_heads": 8, "mamba_n_groups": 8, "n_groups": 8, "mamba_head_dim": 64, "mamba_d_conv": 4,
        "conv_kernel": 4, "mamba_expand": 2, "expand": 2, "mamba_hidden_act": "silu", "mamba_dt_min": 0.001,
        "mamba_dt_max": 0.1, "mamba_dt_limit": [0.0, 1e9], "mamba_dt_init_floor": 1e-4, "mamba_conv_bias": True,
        "mamba_proj_bias": False, "mamba_chunk_size": 128, "chunk_size": 128, "rescale_prenorm_residual": True,
        "torch_dtype": "bfloat16",
    }


def train_tokenizer(corpus: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(corpus.read_text(encoding="utf-8").splitlines(), trainer)
    return tokenizer


def _pad_vocab(tokenizer_json: dict) -> None:
    # Random weights sample any id below vocab_size: every id must decode to text.
    vocab = tokenizer_json["model"]["vocab"]
    for i in range(len(vocab) + len(tokenizer_json["added_tokens"]) - len(SPECIAL_TOKENS), VOCAB_SIZE):
        vocab.setdefault(f"\u0120v{i}", i)


def build(out: Path, corpus: Path, seed: int = 0) -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tokenizer_json = json.loads(train_tokenizer(corpus).to_str())
    _pad_vocab(tokenizer_json)
    write_text(json.dumps(tokenizer_json, ensure_ascii=False), out / "tokenizer.json")
    write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "pad_token": "<unk>", "model_max_length": 4096, "add_bos_token": False, "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False}, indent=1), out / "tokenizer_config.json")
    random.seed(seed)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**model_config()))
    model.save_pretrained(out)  # writes config.json and generation_config.json
    config = json.loads((out / "config.json").read_text())
    write_text(json.dumps({**config, **model_config()}, indent=1), out / "config.json")  # keep SGLang's fields
    generation = json.loads((out / "generation_config.json").read_text())
    write_text(json.dumps({**generation, **SERVED_SAMPLING}, indent=1), out / "generation_config.json")
    return out
