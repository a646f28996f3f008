"""The light columns (checkpoint_db.LIGHT) of every committed part, as `shardgen status` and its ETA read them,
without opening every part each call (generate/checkpoint.py is its owner; nothing else imports this module). Each
shard folder has a cache (Layout.status_cache, under results/.shardgen: a write in the shard folder would make
Snakemake rerun the shard): the light rows of the parts its footer lists by (name, size, mtime_ns, inode), each row
with its part's name in place of its path. A committed part never changes (written once by atomic rename; it can
only disappear), so a call keeps the cached rows of listed parts still there unchanged, reads only the parts not
listed (checkpoint_db.parts_query), and rewrites the cache (atomically, store.atomic: last writer wins) when that
changed anything. A missing, damaged or unreadable cache is ignored and rebuilt from the parts, never an error. Only
status reads it: generate and merge read the parts."""

import glob
import json
import logging
import os
from collections import defaultdict
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from shardgen.store import db
from shardgen.store.atomic import committed
from shardgen.generate.checkpoint_db import LIGHT, define_prompt_set, parts_query
from shardgen.generate.checkpoint_parts import unreadable
from shardgen.layout import Layout, parts_index_path

log = logging.getLogger(__name__)

MANIFEST_KEY = "shardgen.status_cache.parts"
VERSION_KEY = "shardgen.status_cache.version"
VERSION = "2"  # 2: prompt_tokens (winners.sql judges a turn by the context it fits)
_CACHED = ", ".join(c for c in LIGHT.names if c != "filename")

Stat = tuple[int, int, int]  # size, mtime_ns, inode


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:  # moved away meanwhile (quarantine, reset)
        return None


def _key(st: os.stat_result | None) -> Stat | None:
    return None if st is None else (st.st_size, st.st_mtime_ns, st.st_ino)


def _manifest(cache: Path) -> dict[str, Stat]:
    """The parts a folder's cache covers (from its footer only); none if it is missing, damaged or of another
    version."""
    try:
        meta = pq.read_schema(cache).metadata or {}
        if meta.get(VERSION_KEY.encode()) != VERSION.encode():
            raise ValueError(f"version {meta.get(VERSION_KEY.encode())!r}")
        return {name: tuple(stat) for name, stat in json.loads(meta[MANIFEST_KEY.encode()]).items()}
    except FileNotFoundError:
        return {}
    except Exception as err:  # noqa: BLE001 - any damage: rebuilt from the parts
        log.info("%s is unreadable (%s: %s); rebuilding it from the parts", cache, type(err).__name__, err)
        return {}


def _insert_parts(con: duckdb.DuckDBPyConnection, files: list[str]) -> dict[str, str]:
    """Append the light columns of `files` to `parts`; return those unreadable, with why (left where they are)."""
    bad: dict[str, str] = {}
    while readable := [f for f in files if f not in bad]:
        try:
            con.execute(f"INSERT INTO parts {parts_query(con, readable, LIGHT)}")
            break
        except duckdb.Error:  # the statement is rolled back whole
            found = unreadable(readable)
            if not found:
                raise
            bad.update(found)
    return bad


def _insert_cached(con: duckdb.DuckDBPyConnection, cache: Path, prefix: str, kept: list[str], every: bool) -> bool:
    """Append the cached rows of the parts `kept` (`every` part the cache lists, or only some) to `parts`, each
    row's filename prefix + its part's name; False if the cache cannot be read (nothing appended)."""
    rows = f"SELECT {_CACHED}, {db.quote(prefix)} || part AS filename FROM read_parquet({db.quote(cache)})"
    if not every:  # parts gone since: their rows are dropped
        con.execute("CREATE OR REPLACE TEMP TABLE _kept AS SELECT unnest(?::VARCHAR[]) AS part", [kept])
        rows = f"SELECT c.* FROM ({rows}) c SEMI JOIN _kept k ON c.filename = {db.quote(prefix)} || k.part"
    try:
        con.execute(f"INSERT INTO parts BY NAME {rows}")
        return True
    except duckdb.Error as err:
        log.info("%s is unreadable (%s); rebuilding it from the parts", cache, err)
        return False


def _write_cache(con: duckdb.DuckDBPyConnection, cache: Path, prefix: str, manifest: dict[str, Stat]) -> None:
    """The folder's rows now in `parts` (those whose filename starts with prefix), with the parts they cover."""
    table = con.sql(f"SELECT {_CACHED}, filename[{len(prefix) + 1}:] AS part FROM parts WHERE "
                    f"starts_with(filename, {db.quote(prefix)}) ORDER BY filename, file_row_number").to_arrow_table()
    meta = {VERSION_KEY: VERSION, MANIFEST_KEY: json.dumps(manifest, sort_keys=True)}
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with committed(cache) as tmp:
            pq.write_table(table.replace_schema_metadata(meta), tmp, compression="zstd")
    except OSError as err:  # read-only results, a full disk: status still answers, reading the parts next time
        log.info("could not write %s (%s)", cache, err)


def _load_folder(con: duckdb.DuckDBPyConnection, layout: Layout, folder: Path, paths: dict[str, str],
                 mtimes: dict[str, float]) -> dict[str, str]:
    """One folder's parts (name -> path as globbed) into `parts`: cached rows of unchanged parts, the rest read;
    each part's st_mtime into `mtimes` (by path)."""
    found = {name: _stat(path) for name, path in paths.items()}
    mtimes.update((paths[name], st.st_mtime) for name, st in found.items() if st is not None)
    prefix = os.path.join(str(folder), "")
    if any(path != prefix + name for name, path in paths.items()):  # never: glob joins folder and name so
        return _insert_parts(con, sorted(paths.values()))
    cache = layout.status_cache(folder)
    listed = _manifest(cache)
    stats = {name: _key(st) for name, st in found.items()}
    kept = sorted(name for name, stat in listed.items() if stats.get(name) == stat)  # unchanged, still there
    if kept and not _insert_cached(con, cache, prefix, kept, len(kept) == len(listed)):
        listed, kept = {}, []
    known = set(kept)
    new = sorted(name for name, stat in stats.items() if stat is not None and name not in known)
    bad = _insert_parts(con, [paths[name] for name in new])
    added = [name for name in new if paths[name] not in bad]
    if added or len(kept) != len(listed):
        # kept and added parts are all there (stat not None): kept matched its listed stat, added was new with one
        _write_cache(con, cache, prefix, {name: stat for name in [*kept, *added] if (stat := stats[name]) is not None})
    return bad


def open_light(layout: Layout, prompts: str) -> tuple[duckdb.DuckDBPyConnection, dict[str, str], dict[str, float]]:
    """(connection, unreadable parts, each part's st_mtime by path as globbed): `parts` holds every committed part's
    light columns (checkpoint_db.parts_query), with the prompt set `prompts` (SQL) and the winners
    script over them. Unreadable parts are left where they are (status only reads) and named."""
    con = duckdb.connect()
    db.create_empty(con, "parts", LIGHT)
    folders: dict[Path, dict[str, str]] = defaultdict(dict)
    for path in glob.glob(layout.parts_glob):
        folders[Path(path).parent][os.path.basename(path)] = path
    bad: dict[str, str] = {}
    mtimes: dict[str, float] = {}
    for folder in sorted(folders):
        bad.update(_load_folder(con, layout, folder, folders[folder], mtimes))
    define_prompt_set(con, prompts)
    return con, bad, mtimes


def stamp(layout: Layout) -> tuple:
    """Every part and parts index by name, size and modification time: what open_light and the shards' indexes
    read, so equal stamps read equal."""
    paths = [*glob.glob(layout.parts_glob), *glob.glob(str(parts_index_path(layout.shard_dir("*"))))]
    stats = []
    for path in sorted(paths):
        try:
            st = os.stat(path)
        except FileNotFoundError:  # moved away meanwhile (quarantine, reset): the next stamp differs anyway
            continue
        stats.append((path, st.st_size, st.st_mtime_ns))
    return tuple(stats)
