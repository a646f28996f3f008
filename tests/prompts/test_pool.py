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


def test_an_input_under_four_chunks_is_rendered_in_the_stages_process_whatever_its_workers(make_config, write_jsonl,
                                                                                            tmp_path, monkeypatch):
    from shardgen.prompts.stage import build_prompts

    monkeypatch.setattr(sources, "CHUNK_ROWS", 3)
    path = write_jsonl("a.jsonl", [{"query": f"Question {i}: how far is {i} km?"} for i in range(11)])
    config = make_config([{"name": "a", "path": path, "format": "query_response"}])
    started = []
    real_executor = pool._executor

    def counting_executor(setup, workers):
        started.append(workers)
        return real_executor(setup, workers)

    monkeypatch.setattr(pool, "_executor", counting_executor)
    small = build_prompts(config, tmp_path / "small", workers=2)  # 11 rows, under 4 chunks of 3
    assert started == [] and small["a"]["read"] == 11
    path = write_jsonl("a.jsonl", [{"query": f"Question {i}: how far is {i} km?"} for i in range(12)])
    assert build_prompts(config, tmp_path / "four-chunks", workers=2)["a"]["read"] == 12
    assert started == [2]
    assert pool.small_input_rows() == 4 * 3
