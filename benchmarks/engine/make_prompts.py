"""Write benchmarks/engine/data/prompts.jsonl (committed): 3,000 chat prompts of realistic, varied length (20-300
words, like instruction datasets), the fixed input of gpu_throughput.py."""

import json
import random
from pathlib import Path

HERE = Path(__file__).parent
WORDS = (HERE.parents[1] / "config" / "demo" / "corpus.txt").read_text().split()
ASKS = ["Explain", "Summarize", "Solve", "Rewrite", "Answer the question", "Give three examples of", "Translate"]


def main(n: int = 3000) -> None:
    rnd = random.Random(2026)
    with open(HERE / "data" / "prompts.jsonl", "w") as f:
        for i in range(n):
            body = " ".join(rnd.choice(WORDS) for _ in range(int(rnd.lognormvariate(4.3, 0.6)) % 281 + 20))
            f.write(json.dumps({"prompt": f"{rnd.choice(ASKS)} ({i}): {body}"}) + "\n")


if __name__ == "__main__":
    main()
