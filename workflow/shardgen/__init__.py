"""shardgen: instruction datasets -> sharded, checkpointed generation with an offline engine."""

from pathlib import Path

__version__ = "0.1.0"



class ShardgenError(Exception):
    """A problem the user can act on: its message names the file, row, key or shard. The CLI prints it and exits 2
    (no traceback); anything else is a bug and keeps its traceback."""


class ConfigError(ShardgenError, ValueError):
    """A configuration problem, named by its key path (e.g. `sources[1].format`). Defined here, below the config and
    the engine registry both, because each raises it about the other's keys."""


# The package is installed editable from the repository; schemas and SQL live beside it under workflow/.
WORKFLOW_DIR = Path(__file__).resolve().parent.parent
