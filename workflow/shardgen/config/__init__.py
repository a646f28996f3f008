"""The one typed configuration: `loading` reads a config file and builds `Config` (frozen sections, resolved once),
`schema` is its one validation (workflow/schemas/config.schema.yaml with the declared keys filled in), `sections`
its typed sections, `doc` README's key table rendered from the schema. Callers import `Config` and `ConfigError`
from here."""

from shardgen.config.loading import (CONFIG_ENV, DEFAULT_CONFIG, Config, ConfigError, complete_config, config_path,
                                     read_file, results_dir_of)

__all__ = ["CONFIG_ENV", "DEFAULT_CONFIG", "Config", "ConfigError", "complete_config", "config_path", "read_file",
           "results_dir_of"]
