"""Requests an engine took back from its running batch because its KV pool was full (SGLang's retractions; vLLM
calls them preemptions): each goes back to the queue and is prefilled again when readmitted. A backend reads its
own log lines into a `Retraction` (`Backend.read_log_line`); `Retractions` adds them up for the done file
(`engine.retractions`, a backend-neutral key of the engine record) and for `shardgen diagnose`."""

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Retraction:
    """One retraction, as one log line says it."""
    requests: int  # requests taken back
    # KV tokens the retraction freed (None: the line does not say, as SGLang 0.4's did not): the
    # retracted requests' prompts and the tokens they had generated, which their readmission prefills again.
    tokens: int | None = None


@dataclass
class Retractions:
    """A run's retractions added up. `tokens` sums the lines that name a count; `uncounted` is how many did not."""
    events: int = 0
    requests: int = 0
    tokens: int = 0
    uncounted: int = 0

    def add(self, retraction: Retraction) -> None:
        self.events += 1
        self.requests += retraction.requests
        if retraction.tokens is None:
            self.uncounted += 1
        else:
            self.tokens += retraction.tokens

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def of_record(cls, record: dict | None) -> "Retractions | None":
        """The retractions a done file's engine section records; None for an engine that records none (a done file
        written before they were recorded, or a backend that cannot see them)."""
        recorded = (record or {}).get("retractions")
        return cls(**recorded) if recorded is not None else None
