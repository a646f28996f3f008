"""The files of each trainer's hidden-state export (merge/hidden_exports.py streams the turns to them): one writer a
trainer, each taking a turn's row (input_ids, loss_mask) and its stored states, and saying which turns it leaves out."""

import shutil
from pathlib import Path

from shardgen.capture import decoded

DFLASH_SHORT = ("fewer than two consecutive supervised tokens (loss_mask 1): SpecForge's DFlash refuses such a sample "
                "(offline DFlash-family samples require two consecutive supervised tokens), as its own prepare step "
                "filters them out")


def has_consecutive_supervised(loss_mask) -> bool:
    """SpecForge's DFlash rule (data/loss_mask.py::has_consecutive_supervised_tokens): two adjacent 1s."""
    return any(a and b for a, b in zip(loss_mask, loss_mask[1:]))


def _ids(values):
    import torch

    return torch.tensor(list(values), dtype=torch.long)


class SpecForgeEagle3:
    """SpecForge's offline EAGLE-3 files: the auxiliary layers and L, decoded to bfloat16."""
    dtype = "bfloat16"

    def __init__(self, folder: Path, role: dict):
        self.folder, self.role = folder, role

    def refuses(self, row: dict) -> str | None:
        return None

    def add(self, index: int, row: dict, stored: dict) -> None:
        import torch

        states = decoded(stored, torch.bfloat16)
        torch.save({"input_ids": _ids(row["input_ids"]), "loss_mask": _ids(row["loss_mask"]),
                    "hidden_state": states[:, self.role["last"]].unsqueeze(0).contiguous(),
                    "aux_hidden_state": states[:, self.role["aux"]].flatten(1).unsqueeze(0).contiguous()},
                   self.folder / f"data_{index:08d}.ckpt")

    def close(self) -> None:
        pass


class SpecForgeDFlash(SpecForgeEagle3):
    """SpecForge's offline DFlash files: the auxiliary layers alone, decoded to bfloat16."""

    def refuses(self, row: dict) -> str | None:
        return None if has_consecutive_supervised(row["loss_mask"]) else DFLASH_SHORT

    def add(self, index: int, row: dict, stored: dict) -> None:
        import torch

        states = decoded(stored, torch.bfloat16)
        torch.save({"input_ids": _ids(row["input_ids"]), "loss_mask": _ids(row["loss_mask"]),
                    "hidden_states": states[:, self.role["aux"]].flatten(1).contiguous()},
                   self.folder / f"data_{index:08d}.ckpt")


class Speculators:
    """speculators' ArrowDataset folder: the token rows streamed to an Arrow file as the turns are written, then
    saved as a `datasets` folder beside hidden_states/; the states kept as stored (fp8 with its scale)."""

    def __init__(self, folder: Path, role: dict, dtype: str):
        from datasets import Features, Sequence, Value
        from datasets.arrow_writer import ArrowWriter

        self.folder, self.role, self.dtype = folder, role, dtype
        (folder / "hidden_states").mkdir()
        # not in `folder` itself: datasets refuses to save a dataset into the folder of its own file
        self.rows = folder / ".rows" / "rows.arrow"
        self.rows.parent.mkdir()
        self.writer = ArrowWriter(features=Features({"input_ids": Sequence(Value("int64")),
                                                     "loss_mask": Sequence(Value("int64")),
                                                     "seq_len": Value("int64")}), path=str(self.rows))

    def refuses(self, row: dict) -> str | None:
        return None

    def add(self, index: int, row: dict, stored: dict) -> None:
        from safetensors.torch import save_file

        # fp8 values keep their per-position scale: it is the amax over every captured layer, a subset's included
        tensors = {"token_ids": _ids(row["input_ids"]),
                   "hidden_states": stored["states"][:, self.role["aux"] + [self.role["before_norm"]]].contiguous()}
        if "scale" in stored:
            tensors["hidden_states_scales"] = stored["scale"]
        save_file(tensors, str(self.folder / "hidden_states" / f"hs_{index}.safetensors"))
        self.writer.write({"input_ids": list(row["input_ids"]), "loss_mask": list(row["loss_mask"]),
                           "seq_len": len(row["input_ids"])})

    def close(self) -> None:
        from datasets import Dataset

        self.writer.finalize()
        self.writer.close()
        Dataset.from_file(str(self.rows)).with_format("torch").save_to_disk(str(self.folder))
        shutil.rmtree(self.rows.parent)


def writer(trainer: str, folder: Path, role: dict, dtype: str):
    """The file writer of `trainer`'s export into `folder`."""
    if trainer == "speculators":
        return Speculators(folder, role, dtype)
    return (SpecForgeEagle3 if trainer == "specforge" else SpecForgeDFlash)(folder, role)
