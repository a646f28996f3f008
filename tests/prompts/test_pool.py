"""prompts/pool.py on its own: chunks through worker processes give the same results as in process, in input
order, with a bounded number in flight."""

from shardgen.prompts import pool, sources
from shardgen.prompts.sources import open_source
from shardgen.model.target import ModelInfo


def test_worker_results_are_the_in_process_ones_in_input_order(make_config, write_jsonl, monkeypatch):
    monkeypatch.setattr(sources, "CHUNK_ROWS", 3)
    path = write_jsonl("a.jsonl", [{"query": f"Question {i}: how far is {i} km?"} for i in range(20)] + [
        {"query": "  "}])
    config = make_config([{"name": "a", "path": path, "format": "query_response"}])
    model = ModelInfo.from_config(config.model)
    chunks = list(open_source(config.sources[0])[0])
    assert len(chunks) == 7  # 21 rows by 3: more chunks than the window of 2 workers x 2 in flight
    submitted = []
    real_submit = pool.ProcessPoolExecutor.submit

    def counting_submit(self, fn, chunk):
        submitted.append(chunk.first_row)
        return real_submit(self, fn, chunk)

    monkeypatch.setattr(pool.ProcessPoolExecutor, "submit", counting_submit)
    local = list(pool.chunk_results(config, model, chunks, workers=1))
    assert submitted == []  # one worker: in this process
    results = pool.chunk_results(config, model, chunks, workers=2)
    first = next(results)
    assert len(submitted) == 2 * pool.IN_FLIGHT_PER_WORKER  # the window, not every chunk, before the first result
    spawned = [first, *results]
    assert submitted == [c.first_row for c in chunks]
    assert [r.rows_read for r in spawned] == [len(c) for c in chunks] == [3] * 7
    assert [r.candidates["prompt_id"].to_pylist() for r in spawned] == \
        [r.candidates["prompt_id"].to_pylist() for r in local]
    assert [r.rejected for r in spawned] == [r.rejected for r in local] and local[-1].rejected[0][1] == "empty_prompt"
    ids = [pid for r in spawned for pid in r.candidates["prompt_id"].to_pylist()]
    assert len(ids) == len(set(ids)) == 20
