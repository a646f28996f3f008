"""shardgen: instruction datasets -> sharded, checkpointed generation with an offline engine."""

from pathlib import Path

__version__ = "0.1.0"

# The package is installed editable from the repository; schemas and SQL live beside it under workflow/.
WORKFLOW_DIR = Path(__file__).resolve().parent.parent
