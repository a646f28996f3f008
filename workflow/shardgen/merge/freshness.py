"""What a finished run promises: every dataset row is what the current config asks for, that is its gen_key is the
one the config gives its prompt now (model, tokenizer and template hashes, its source's sampling, the model's
generation config included, and template arguments), and a turn after the first fits model.context_length. merge
checks the prompt set it builds from; report checks the dataset file it reports on."""

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from shardgen import ShardgenError
from shardgen.config import Config
from shardgen.generate.progress import built_context_length, refit
from shardgen.keys import gen_key_of
from shardgen.layout import Layout
from shardgen.model.target import ModelInfo


class StaleError(ShardgenError, RuntimeError):
    """Rows made for other settings than the current config's: the run must not end as if they were current."""


def stale_by_source(config: Config, path: Path, model: ModelInfo) -> tuple[int, dict[str, int]]:
    """Rows in the parquet file at path, and per source the rows whose gen_key the current config does not give.
    A dataset row of turn t >= 2 has its own key (chained over the turns before it); it is current when its
    conversation's turn-1 row is and its prompt_tokens + max_new_tokens fit model.context_length."""
    settings = {s.name: config.gen_settings(s, model.served_sampling) for s in config.sources}
    key_of = {name: gen_key_of(model.fingerprint, gen) for name, gen in settings.items()}
    prompt_room = {name: config.model.context_length - gen["max_new_tokens"] for name, gen in settings.items()}
    names = pq.ParquetFile(path).schema_arrow.names
    columns = ["prompt_id", "gen_key", "source", "prompt_tokens"] + (["turn"] if "turn" in names else [])
    rows, current_firsts = 0, set()
    stale: dict[str, int] = {}  # source -> its stale rows
    later: dict[tuple[str, str], list[int]] = {}  # (source, prompt_id) -> its turns after the first
    for batch in pq.ParquetFile(path).iter_batches(columns=columns, batch_size=65536):
        turns = batch.column(4).to_pylist() if len(columns) == 5 else [1] * batch.num_rows
        for pid, key, source, prompt_tokens, turn in zip(*(batch.column(i).to_pylist() for i in range(4)), turns):
            rows += 1
            if turn > 1 and source in prompt_room and prompt_tokens > prompt_room[source]:
                stale[source] = stale.get(source, 0) + 1
            elif turn > 1:
                later.setdefault((source, pid), []).append(turn)
            elif source not in key_of or key_of[source](pid) != key:
                stale[source] = stale.get(source, 0) + 1
            else:
                current_firsts.add((source, pid))
    for (source, pid), turns in later.items():
        if (source, pid) not in current_firsts:
            stale[source] = stale.get(source, 0) + len(turns)
    return rows, stale
@dataclass(frozen=True)
class ConfigChanges:
    """What the current config asks for that the last prompt set does not hold, judged before `prompts` rebuilds it
    (`shardgen status`). per_shard: each split shard's prompts whose gen_key the config now gives otherwise or whose
    source it no longer configures (a model, template, template-argument or sampling change: Snakemake reruns
    prompts, split and every generate job, which generates them again); refit: each split shard's conversations
    that the config's model.context_length ends elsewhere than the prompt set's (generate.progress.refit);
    missing_sources: the configured sources the prompt set was built without; reread_sources: those whose `limit`
    now reads other rows than the prompt set was built from."""
    per_shard: dict[int, int]
    missing_sources: list[str]
    refit: dict[int, int] = field(default_factory=dict)
    reread_sources: list[str] = field(default_factory=list)
    context_length: tuple[int, int] | None = None  # (the prompt set's, the config's) where they differ

    def stale(self, shard: int) -> bool:
        return bool(self.per_shard.get(shard) or self.refit.get(shard) or self.missing_sources
                    or self.reread_sources)


def _reads_other_rows(limit: int | None, built_limit: int | None, rows_read: int) -> bool:
    """Whether a source read with `built_limit` (None: none), which gave rows_read rows, gives others at `limit`:
    a source that ran out before its limit gives the same rows at any limit not below them."""
    if limit == built_limit:
        return False
    ran_out = built_limit is None or rows_read < built_limit
    return not ran_out or (limit is not None and limit < rows_read)


def _reread_sources(config: Config, sources: Path) -> list[str]:
    """The configured sources whose limit reads other rows than the sources table says the prompt set was built from
    (a table written before it recorded the limit: none)."""
    if "row_limit" not in pq.read_schema(sources).names:
        return []
    built = {r["source"]: r for r in pq.read_table(sources, columns=["source", "rows_read", "row_limit"]).to_pylist()}
    return sorted(s.name for s in config.sources if s.name in built
                  and _reads_other_rows(s.limit or None, built[s.name]["row_limit"], built[s.name]["rows_read"]))


def changed_by_config(config: Config, layout: Layout) -> ConfigChanges:
    model = config.target_model
    per_shard = {shard: sum(stale_by_source(config, layout.split(shard), model)[1].values())
                 for shard in layout.split_shards()}
    sources = layout.prompt_table("sources")
    built = set(pq.read_table(sources, columns=["source"])["source"].to_pylist()) if sources.is_file() else set()
    built_for, context = built_context_length(layout), config.model.context_length
    changed = built_for is not None and built_for != context
    return ConfigChanges(per_shard, sorted({s.name for s in config.sources} - built),
                         refit(layout, context) if changed else {},
                         _reread_sources(config, sources) if sources.is_file() else [],
                         (built_for, context) if built_for is not None and changed else None)


def check(config: Config, path: Path) -> int:
    """Raise StaleError naming the stale rows per source; return the rows checked."""
    if not Path(path).is_file():
        raise StaleError(f"{path} is missing: rerun snakemake")
    rows, stale = stale_by_source(config, path, config.target_model)
    if stale:
        per_source = ", ".join(f"{source}: {n}" for source, n in sorted(stale.items()))
        raise StaleError(f"{path} is stale: {sum(stale.values())} of {rows} rows were made for other settings than "
                         "the current config's (model, sampling, template or model.context_length; per source: "
                         f"{per_source}). Run `snakemake --forcerun prompts` to rebuild from the current config "
                         "(committed rows of unchanged prompts are reused)")
    return rows


def check_prompt_set(config: Config, prompts: Path, sources: Path) -> int:
    """The prompt set merge builds from: made from every configured source (the sources table `sources` lists),
    every gen_key current."""
    built = set(pq.read_table(sources, columns=["source"])["source"].to_pylist())
    if missing := sorted({s.name for s in config.sources} - built):
        raise StaleError(f"{prompts} was built without the configured source(s) {missing}: run "
                         "`snakemake --forcerun prompts`")
    return check(config, prompts)


def check_dataset(config: Config, dataset: Path, conversations: int) -> int:
    """The dataset file: every row current, and one turn-1 row per conversation of the current prompt set with a
    generated turn (`conversations`: the generated ones and the failed ones with turns before the failure), no
    (conversation, turn) twice."""
    rows = check(config, dataset)
    names = pq.ParquetFile(dataset).schema_arrow.names
    # a disagreement with the parts is fixed by rebuilding the dataset; a plain rerun may stop here again where
    # Snakemake sees merge's output as newer than its inputs
    rebuild = "rerun snakemake; if it stops here again, `snakemake --forcerun merge` rebuilds it from the parts"
    if "turn" in names:
        table = pq.read_table(dataset, columns=["prompt_id", "turn"])
        turns = list(zip(table["prompt_id"].to_pylist(), table["turn"].to_pylist()))
        firsts = sum(t == 1 for _, t in turns)
        if len(set(turns)) != len(turns):
            raise StaleError(f"{dataset} holds a (conversation, turn) twice: {rebuild}")
    else:
        firsts = rows
    if firsts != conversations:
        raise StaleError(f"{dataset} has {rows} rows but the parts hold {conversations} generated prompts of the "
                         f"current prompt set (conversations with a generated turn; {firsts} of its rows are first "
                         f"turns): it is older than the parts; {rebuild}")
    return rows
