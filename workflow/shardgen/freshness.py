"""What a finished run promises: every dataset row is what the current config asks for, that is its gen_key is the
one the config gives its prompt now (model, tokenizer and template hashes, its source's sampling and template
arguments). merge checks the prompt set it builds from; report checks the dataset file it reports on."""

from pathlib import Path

import pyarrow.parquet as pq

from shardgen import ShardgenError
from shardgen.config import Config
from shardgen.keys import gen_key_of
from shardgen.layout import prompt_table
from shardgen.model import ModelInfo


class StaleError(ShardgenError, RuntimeError):
    """Rows made for other settings than the current config's: the run must not end as if they were current."""


def stale_by_source(config: Config, path: Path, fingerprint: dict) -> tuple[int, dict[str, int]]:
    """Rows in the parquet file at path, and per source the rows whose gen_key the current config does not give."""
    key_of = {s.name: gen_key_of(fingerprint, config.gen_settings(s)) for s in config.sources}
    rows, stale = 0, {}
    for batch in pq.ParquetFile(path).iter_batches(columns=["prompt_id", "gen_key", "source"], batch_size=65536):
        for pid, key, source in zip(*(batch.column(i).to_pylist() for i in range(3))):
            rows += 1
            if source not in key_of or key_of[source](pid) != key:
                stale[source] = stale.get(source, 0) + 1
    return rows, stale


def check(config: Config, path: Path) -> int:
    """Raise StaleError naming the stale rows per source; return the rows checked."""
    if not Path(path).is_file():
        raise StaleError(f"{path} is missing: rerun snakemake")
    rows, stale = stale_by_source(config, path, ModelInfo.from_config(config.model).fingerprint)
    if stale:
        per_source = ", ".join(f"{source}: {n}" for source, n in sorted(stale.items()))
        raise StaleError(f"{path} is stale: {sum(stale.values())} of {rows} rows were made for other settings than "
                         f"the current config's (model, sampling or template; per source: {per_source}). Run "
                         "`snakemake --forcerun prompts` to rebuild from the current config (committed rows of "
                         "unchanged prompts are reused)")
    return rows


def check_prompt_set(config: Config, prompts_dir: Path) -> int:
    """The prompt set merge builds from: made from every configured source, every gen_key current."""
    built = set(pq.read_table(prompt_table(prompts_dir, "sources"), columns=["source"])["source"].to_pylist())
    if missing := sorted({s.name for s in config.sources} - built):
        raise StaleError(f"{prompts_dir} was built without the configured source(s) {missing}: run "
                         "`snakemake --forcerun prompts`")
    return check(config, prompt_table(prompts_dir, "prompts"))


def check_dataset(config: Config, dataset: Path, generated: int) -> int:
    """The dataset file: every row current, and one row per generated prompt of the current prompt set."""
    rows = check(config, dataset)
    if rows != generated:
        raise StaleError(f"{dataset} has {rows} rows but the parts hold {generated} generated prompts of the current "
                         "prompt set: it is older than the parts; rerun snakemake (merge rebuilds it)")
    return rows
