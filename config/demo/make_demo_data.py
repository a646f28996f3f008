"""Regenerate the demo's small input files (committed; run only to change them): realistic rows in each public
format, a few duplicates across sources and a few bad rows, so the demo's report shows every path."""

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).parent
rnd = random.Random(7)
NAMES = ["Ava", "Ben", "Chloe", "Dev", "Emma", "Farah", "Gus", "Hana"]
ITEMS = ["apples", "pencils", "marbles", "stickers", "books", "cookies"]
TOPICS = ["photosynthesis", "the French Revolution", "supply and demand", "plate tectonics", "recursion",
          "the water cycle", "compound interest", "natural selection", "Ohm's law", "binary search"]
LANGS = ["Python", "JavaScript", "Rust", "Go", "SQL"]
TASKS = ["reverse a linked list", "parse a CSV line with quoted fields", "compute the median of a stream",
         "check whether a string is a palindrome", "merge two sorted arrays", "count word frequencies in a file"]


def math_question(i):
    a, b, c = rnd.randint(3, 40), rnd.randint(2, 15), rnd.randint(1, 9)
    name, item = NAMES[i % len(NAMES)], ITEMS[i % len(ITEMS)]
    return (f"{name} has {a} {item}. She buys {b} more bags with {c} {item} in each bag. "
            f"How many {item} does she have now?", f"{name} buys {b} x {c} = {b * c} {item}. "
            f"So she has {a} + {b * c} = {a + b * c} {item}. The answer is: {a + b * c}")


def main():
    metamath = [{"query": q, "response": r, "type": "GSM_Rephrased"} for q, r in map(math_question, range(40))]
    bad = ['{"query": "What is 2 + 2?", "response": "4"', '["not", "an", "object"]', '{"response": "no query"}',
           '{"query": "   ", "response": "blank"}', '{"query": 42, "response": "number"}']
    with open(HERE / "metamathqa.jsonl", "w") as f:
        for row in metamath:
            f.write(json.dumps(row) + "\n")
        f.write("\n".join(bad) + "\n")
    with open(HERE / "metamathqa.jsonl", "ab") as f:
        f.write(b'{"query": "caf\\u00e9 \xff", "response": "invalid UTF-8 byte"}\n')
    web = {"question": [f"Explain {t} in simple terms, with one everyday example." for t in TOPICS] * 3,
           "answer": [f"{t.capitalize()} can be understood as follows..." for t in TOPICS] * 3}
    web["question"] = [q if i < 10 else q.replace("simple", "precise" if i < 20 else "technical")
                       for i, q in enumerate(web["question"])]
    pq.write_table(pa.table(web), HERE / "webinstruct.parquet")
    code = [{"query": f"Write a {lang} function to {task}.", "answer": f"```{lang.lower()}\n# ...\n```"}
            for lang in LANGS for task in TASKS[:4]]
    code.append({"query": metamath[0]["query"], "answer": "duplicate of a MetaMathQA prompt"})
    (HERE / "codefeedback.json").write_text(json.dumps(code, indent=1))
    infinity = []
    for i in range(30):
        topic, lang = TOPICS[i % len(TOPICS)], LANGS[i % len(LANGS)]
        conv = [{"from": "human", "value": f"I am learning {lang}. How would you teach {topic} to a beginner? ({i})"},
                {"from": "gpt", "value": f"Start with the intuition behind {topic}..."}]
        if i % 3 == 0:
            conv = [{"from": "system", "value": "You are a patient tutor."}] + conv
        if i % 4 == 0:
            conv += [{"from": "human", "value": "Can you give an exercise?"}, {"from": "gpt", "value": "Sure..."}]
        infinity.append({"id": str(i), "conversations": conv})
    infinity.append({"id": "bad-role", "conversations": [{"from": "tool", "value": "{}"}]})
    infinity.append({"id": "no-user", "conversations": [{"from": "gpt", "value": "Hello!"}]})
    with open(HERE / "infinity.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in infinity)
    alpaca = HERE / "alpaca_hf" / "data"
    alpaca.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({
        "instruction": [f"Summarize the following note about {t}." for t in TOPICS] * 2,
        "input": [f"Note {i}: {t} matters because it explains many things." if i % 2 else ""
                  for i, t in enumerate(TOPICS * 2)],
        "output": ["A short summary."] * 20}), alpaca / "train-00000-of-00001.parquet")
    words = " ".join(r["query"] for r in metamath) + " " + " ".join(web["question"] + [c["query"] for c in code])
    sentences = [s.strip() + "." for s in words.replace("?", ".").split(".") if s.strip()]
    (HERE / "corpus.txt").write_text("\n".join(sentences * 3) + "\n")


if __name__ == "__main__":
    main()
