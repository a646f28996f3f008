import pytest

from shardgen.prompts.formats import RowError, conversation

INFINITY = {"id": "7", "conversations": [
    {"from": "system", "value": "You are a tutor."},
    {"from": "human", "value": "What is a prime number?"},
    {"from": "gpt", "value": "A number with exactly two divisors."},
    {"from": "human", "value": "Is 1 prime?"},
    {"from": "gpt", "value": "No."}]}
METAMATH = {"query": "Janet has 3 apples and buys 2 more. How many?", "response": "3 + 2 = 5. The answer is: 5",
            "type": "GSM_Rephrased"}
CODEFEEDBACK = {"query": "Write a Python function that reverses a list.", "answer": "def rev(xs): return xs[::-1]"}
WEBINSTRUCT = {"question": "Explain Ohm's law.", "answer": "V = I R.", "source": "socratic"}
ALPACA = {"instruction": "Summarize the text.", "input": "Cats sleep a lot.", "output": "Cats nap."}
MESSAGES = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}


def test_sharegpt_keeps_turns_before_first_answer_and_counts_dropped():
    conv, replaced = conversation(INFINITY, "sharegpt", {}, None)
    assert conv.messages == [{"role": "system", "content": "You are a tutor."},
                             {"role": "user", "content": "What is a prime number?"}]
    assert conv.reference == "A number with exactly two divisors."
    assert conv.dropped_turns == 2 and not replaced


def test_system_prompt_replaces_the_rows_own():
    conv, replaced = conversation(INFINITY, "sharegpt", {}, "Be brief.")
    assert conv.messages[0] == {"role": "system", "content": "Be brief."} and len(conv.messages) == 2
    assert replaced
    conv, replaced = conversation(METAMATH, "query_response", {}, "Be brief.")
    assert conv.messages[0]["role"] == "system" and not replaced  # added, not replaced


@pytest.mark.parametrize("row, fmt, prompt, reference", [
    (METAMATH, "query_response", METAMATH["query"], METAMATH["response"]),
    (CODEFEEDBACK, "query_response", CODEFEEDBACK["query"], CODEFEEDBACK["answer"]),
    (WEBINSTRUCT, "question_answer", WEBINSTRUCT["question"], WEBINSTRUCT["answer"]),
    (ALPACA, "instruction", "Summarize the text.\n\nCats sleep a lot.", "Cats nap."),
    ({**ALPACA, "input": ""}, "instruction", "Summarize the text.", "Cats nap."),
    (MESSAGES, "messages", "Hi", "Hello"),
    ({"prompt": "Tell me a joke."}, "prompt", "Tell me a joke.", None),
])
def test_every_format(row, fmt, prompt, reference):
    conv, _ = conversation(row, fmt, {}, None)
    assert conv.messages == [{"role": "user", "content": prompt}]
    assert conv.reference == reference


def test_fields_rename_columns():
    conv, _ = conversation({"problem": "2+2?", "solution": "4"}, "question_answer",
                           {"question": "problem", "answer": "solution"}, None)
    assert conv.messages[0]["content"] == "2+2?" and conv.reference == "4"


@pytest.mark.parametrize("row, fmt, reason", [
    (["a", "list"], "prompt", "not_object"),
    ({"response": "no query"}, "query_response", "missing_field"),
    ({"query": 42}, "query_response", "wrong_type"),
    ({"conversations": "hello"}, "sharegpt", "wrong_type"),
    ({"conversations": [{"from": "human"}]}, "sharegpt", "wrong_type"),
    ({"query": ""}, "query_response", "empty_prompt"),
    ({"query": " \n\t "}, "query_response", "empty_prompt"),
    ({"conversations": [{"from": "gpt", "value": "Hello!"}]}, "sharegpt", "no_user_turn"),
    ({"conversations": [{"from": "system", "value": "sys"}]}, "sharegpt", "no_user_turn"),
    ({"conversations": [{"from": "tool", "value": "{}"}]}, "sharegpt", "unknown_role"),
    ({"messages": [{"role": "function", "content": "x"}]}, "messages", "unknown_role"),
    ({"query": "a\x00b"}, "query_response", "invalid_text"),
    ({"query": "lone \ud800 surrogate"}, "query_response", "invalid_text"),
])
def test_bad_rows_are_rejected_with_a_reason(row, fmt, reason):
    with pytest.raises(RowError) as err:
        conversation(row, fmt, {}, None)
    assert err.value.reason == reason and err.value.detail


def test_the_format_list_is_defined_once_in_formats():
    from shardgen.config.schema import schema
    from shardgen.prompts.formats import FORMATS

    enum = schema()["properties"]["sources"]["items"]["properties"]["format"]["enum"]
    assert enum == list(FORMATS)


def test_readme_configuration_table_and_formats_are_the_generated_ones():
    from conftest import REPO
    from shardgen.config.doc import formats_text, key_table

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Configuration"):readme.index("## Outputs")]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    assert table == key_table(), "README's key table differs from the schema: paste `python -m shardgen.config.doc`"
    assert formats_text() in section


def test_an_empty_later_user_turn_is_rejected_naming_the_turn():
    row = {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"},
                             {"from": "human", "value": "   "}, {"from": "gpt", "value": "?"}]}
    with pytest.raises(RowError) as err:
        conversation(row, "sharegpt", {}, None, "each_turn")
    assert (err.value.reason, err.value.detail) == (
        "empty_prompt", "user turn 2 is empty or whitespace (each_turn regenerates every user turn)")
    assert conversation(row, "sharegpt", {}, None, "first")[0].messages == [{"role": "user", "content": "Hi"}]


def test_an_empty_first_turn_says_so_when_a_later_turn_has_text():
    row = {"conversations": [{"from": "human", "value": " "}, {"from": "gpt", "value": "Hello"},
                             {"from": "human", "value": "Now?"}]}
    with pytest.raises(RowError) as err:
        conversation(row, "sharegpt", {}, None, "each_turn")
    assert (err.value.reason, err.value.detail) == ("empty_prompt", "user turn 1 is empty or whitespace")
