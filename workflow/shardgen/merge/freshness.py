"""What a finished run promises: every dataset row is what the current config asks for, that is its gen_key is the
one the config gives its prompt now (model, tokenizer and template hashes, its source's sampling, the model's
generation config included, and template arguments). merge checks the prompt set it builds from; report checks
the dataset file it reports on."""

from pathlib import Path

import pyarrow.parquet as pq

from shardgen import ShardgenError
from shardgen.config import Config
from shardgen.keys import gen_key_of
from shardgen.model.target import ModelInfo


class StaleError(ShardgenError, RuntimeError):
    """Rows made for other settings than the current config's: the run must not end as if they were current."""


def stale_by_source(config: Config, path: Path, model: ModelInfo) -> tuple[int, dict[str, int]]:
    """Rows in the parquet file at path, and per source the rows whose gen_key the current config does not give.
    A dataset row of turn t >= 2 has its own key (chained over the turns before it); it is current when its
    conversation's turn-1 row is."""
    key_of = {s.name: gen_key_of(model.fingerprint, config.gen_settings(s, model.served_sampling))
              for s in config.sources}
    names = pq.ParquetFile(path).schema_arrow.names
    columns = ["prompt_id", "gen_key", "source"] + (["turn"] if "turn" in names else [])
    rows, stale, later, current_firsts = 0, {}, {}, set()
    for batch in pq.ParquetFile(path).iter_batches(columns=columns, batch_size=65536):
        turns = batch.column(3).to_pylist() if len(columns) == 4 else [1] * batch.num_rows
        for pid, key, source, turn in zip(*(batch.column(i).to_pylist() for i in range(3)), turns):
            rows += 1
            if turn > 1:
                later.setdefault((source, pid), []).append(turn)
            elif source not in key_of or key_of[source](pid) != key:
                stale[source] = stale.get(source, 0) + 1
            else:
                current_firsts.add((source, pid))
    for (source, pid), turns in later.items():
        if (source, pid) not in current_firsts:
            stale[source] = stale.get(source, 0) + len(turns)
    return rows, stale
def check(config: Config, path: Path) -> int:
    """Raise StaleError naming the stale rows per source; return the rows checked."""
    if not Path(path).is_file():
        raise StaleError(f"{path} is missing: rerun snakemake")
    rows, stale = stale_by_source(config, path, config.target_model)
    if stale:
        per_source = ", ".join(f"{source}: {n}" for source, n in sorted(stale.items()))
        raise StaleError(f"{path} is stale: {sum(stale.values())} of {rows} rows were made for other settings than "
                         f"the current config's (model, sampling or template; per source: {per_source}). Run "
                         "`snakemake --forcerun prompts` to rebuild from the current config (committed rows of "
                         "unchanged prompts are reused)")
    return rows


def check_prompt_set(config: Config, prompts: Path, sources: Path) -> int:
    """The prompt set merge builds from: made from every configured source (the sources table `sources` lists),
    every gen_key current."""
    built = set(pq.read_table(sources, columns=["source"])["source"].to_pylist())
    if missing := sorted({s.name for s in config.sources} - built):
        raise StaleError(f"{prompts} was built without the configured source(s) {missing}: run "
                         "`snakemake --forcerun prompts`")
    return check(config, prompts)


def check_dataset(config: Config, dataset: Path, generated: int) -> int:
    """The dataset file: every row current, and one turn-1 row per generated prompt (conversation) of the current
    prompt set, no (conversation, turn) twice."""
    rows = check(config, dataset)
    names = pq.ParquetFile(dataset).schema_arrow.names
    if "turn" in names:
        table = pq.read_table(dataset, columns=["prompt_id", "turn"])
        turns = list(zip(table["prompt_id"].to_pylist(), table["turn"].to_pylist()))
        firsts = sum(t == 1 for _, t in turns)
        if len(set(turns)) != len(turns):
            raise StaleError(f"{dataset} holds a (conversation, turn) twice: rerun snakemake (merge rebuilds it)")
    else:
        firsts = rows
    if firsts != generated:
        raise StaleError(f"{dataset} has {rows} rows but the parts hold {generated} generated prompts of the current "
                         f"prompt set ({firsts} of its rows are first turns): it is older than the parts; rerun "
                         "snakemake (merge rebuilds it)")
    return rows
