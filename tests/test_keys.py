from shardgen.keys import gen_key, gen_key_function, prompt_id


def test_gen_key_function_is_gen_key():
    fingerprint = {"model": "m" * 64, "tokenizer": "t\u00e9", "template": "x"}
    sampling = {"max_new_tokens": 32, "temperature": 0.7, "top_p": 0.95, "top_k": -1, "extra": '{"a": "\\"q\\""}'}
    fast = gen_key_function(fingerprint, sampling)
    for text in ("a", "caf\u00e9", "two\nlines"):
        pid = prompt_id([{"role": "user", "content": text}])
        assert fast(pid) == gen_key(pid, fingerprint, sampling)
