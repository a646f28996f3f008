"""A shard's telemetry parts: the rows its engine's log lines become (its backend reads them: `Backend.read_log_line`)
plus our own completions per interval, committed as telemetry-NNNNN.parquet parts (schema: tables.TELEMETRY)."""

import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from shardgen.layout import next_number, telemetry_files, telemetry_path
from shardgen.store.atomic import write_table
from shardgen.store.tables import TELEMETRY


def client_row(ts: datetime, completions: int, output_tokens: int, seconds: float) -> dict:
    """Our own view of an interval: completions (new_seq) and output tokens/s seen by the client."""
    row = dict.fromkeys(TELEMETRY.names)
    row.update(ts=ts, kind="client", new_seq=completions,
               gen_throughput=round(output_tokens / seconds, 2) if seconds > 0 else None)
    return row


class TelemetryWriter:
    """Parsed log lines plus our own completions per interval, committed as telemetry-NNNNN.parquet parts every
    `every_seconds`, so a crash keeps what was seen."""

    def __init__(self, shard_dir: Path, every_seconds: float = 10.0):
        self.dir, self.every_seconds = Path(shard_dir), every_seconds
        self.next_index = next_number(telemetry_files(self.dir))
        self.rows: list[dict] = []
        self.completions = self.output_tokens = 0
        self.lock = threading.Lock()
        self.last_tick = time.monotonic()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="shardgen-telemetry", daemon=True)
        self.thread.start()

    def add(self, row: dict) -> None:
        with self.lock:
            self.rows.append(row)

    def completed(self, output_tokens: int) -> None:
        with self.lock:
            self.completions += 1
            self.output_tokens += output_tokens

    def _loop(self) -> None:
        while not self.stop.wait(self.every_seconds):
            self.flush()

    def flush(self) -> None:
        now = time.monotonic()
        with self.lock:
            if self.completions:
                self.rows.append(client_row(datetime.now(timezone.utc), self.completions, self.output_tokens,
                                            now - self.last_tick))
            rows, self.rows = self.rows, []
            self.completions = self.output_tokens = 0
            self.last_tick = now
        if rows:
            write_table(pa.Table.from_pylist(rows, schema=TELEMETRY),
                        telemetry_path(self.dir, self.next_index))
            self.next_index += 1

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.flush()
