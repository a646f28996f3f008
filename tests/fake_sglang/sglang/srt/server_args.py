"""ServerArgs with every field name of the real SGLang FAKE_SGLANG_VERSION (0.5.13.post1, 0.5.17 or 0.5.23), read from
its wheel into tests/data/sglang-server-args: an argument that version lacks is refused here too. Defaults are
SGLang's for the fields shardgen or this fake reads, None for the rest."""

import dataclasses
import os
from pathlib import Path

VERSION = os.environ.get("FAKE_SGLANG_VERSION", "0.5.13.post1")
FIELDS = Path(__file__).resolve().parents[3] / "data" / "sglang-server-args" / f"{VERSION}.txt"
_DEFAULTS = {"tp_size": 1, "dp_size": 1, "trust_remote_code": False, "log_level": "error", "disable_radix_cache": False,
             "disable_overlap_schedule": False, "mamba_full_memory_ratio": 0.9, "load_format": "auto", "dtype": "auto",
             "decode_log_interval": 40, "mamba_scheduler_strategy": "auto", "mamba_radix_cache_strategy": "auto"}
ServerArgs = dataclasses.make_dataclass(
    "ServerArgs", [(name, object, dataclasses.field(default=_DEFAULTS.get(name)))
                   for name in FIELDS.read_text().splitlines() if name and not name.startswith("#")])
