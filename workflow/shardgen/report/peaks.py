"""Peak dense BF16 tensor FLOP/s and memory bandwidth per GPU, keyed by the name the GPU reports
(`nvidia-smi --query-gpu=name`, `torch.cuda.get_device_name()`), from the vendor datasheets. Dense means without
the 2:4 sparsity the datasheets' headline figures assume (those are twice these). `hardware.peaks` in the config
adds or replaces rows."""

from dataclasses import dataclass

from shardgen import ShardgenError


class UnknownGPU(ShardgenError, LookupError):
    """No peak figures for this GPU name."""


@dataclass(frozen=True)
class Peak:
    tflops: float  # dense BF16 tensor TFLOP/s
    tbps: float  # memory bandwidth, TB/s (10^12 bytes/s)
    source: str


H200 = "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM: BF16 1,979 TFLOPS with sparsity, 4.8 TB/s)"
H100 = "NVIDIA H100 Tensor Core GPU datasheet"
A100 = "NVIDIA A100 Tensor Core GPU datasheet (BF16 312 TFLOPS dense"
PEAKS = {
    "NVIDIA H200": Peak(989.5, 4.8, H200),
    "NVIDIA H200 NVL": Peak(835.5, 4.8, "NVIDIA H200 datasheet (H200 NVL: BF16 1,671 TFLOPS with sparsity, 4.8 TB/s)"),
    "NVIDIA H100 80GB HBM3": Peak(989.5, 3.35, f"{H100} (H100 SXM: BF16 1,979 TFLOPS with sparsity, 3.35 TB/s)"),
    "NVIDIA H100 PCIe": Peak(756.5, 2.0, f"{H100} (H100 PCIe: BF16 1,513 TFLOPS with sparsity, 2 TB/s)"),
    "NVIDIA H100 NVL": Peak(835.5, 3.9, f"{H100} (H100 NVL: BF16 1,671 TFLOPS with sparsity, 3.9 TB/s)"),
    "NVIDIA B200": Peak(2250.0, 8.0, "NVIDIA HGX B200 datasheet (8 GPUs: FP16/BF16 36 PFLOPS with sparsity, "
                                     "64 TB/s; per GPU 4.5 PFLOPS sparse = 2.25 dense, 8 TB/s)"),
    "NVIDIA A100-SXM4-40GB": Peak(312.0, 1.555, f"{A100}, A100 40GB SXM 1,555 GB/s)"),
    "NVIDIA A100-SXM4-80GB": Peak(312.0, 2.039, f"{A100}, A100 80GB SXM 2,039 GB/s)"),
    "NVIDIA A100-PCIE-40GB": Peak(312.0, 1.555, f"{A100}, A100 40GB PCIe 1,555 GB/s)"),
    "NVIDIA A100 80GB PCIe": Peak(312.0, 1.935, f"{A100}, A100 80GB PCIe 1,935 GB/s)"),
    "NVIDIA L40S": Peak(362.05, 0.864, "NVIDIA L40S datasheet (BF16 733 TFLOPS with sparsity, 864 GB/s)"),
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": Peak(
        500.0, 1.792, "NVIDIA RTX PRO 6000 Blackwell datasheet (4,000 AI TOPS = FP4 with sparsity, 1,792 GB/s); "
                      "BF16 dense derived as 1/8 of it (no BF16 figure in the sheet)"),
}
PEAKS["NVIDIA RTX PRO 6000 Blackwell Workstation Edition"] = PEAKS["NVIDIA RTX PRO 6000 Blackwell Server Edition"]


def lookup(name: str | None, overrides: dict | None = None) -> Peak:
    """The peaks for `name` (exact, else case-insensitive); `overrides` maps names to {tflops, tbps}."""
    table = dict(PEAKS)
    for key, row in (overrides or {}).items():
        table[key] = Peak(float(row["tflops"]), float(row["tbps"]), "config hardware.peaks")
    if not name:
        raise UnknownGPU("the GPU is not known: pass --gpu NAME (as nvidia-smi reports it) or set hardware.gpu")
    folded = {k.casefold(): v for k, v in table.items()}
    if peak := table.get(name) or folded.get(name.strip().casefold()):
        return peak
    raise UnknownGPU(f"no peak figures for GPU {name!r}: add it under hardware.peaks in the config "
                     f"({{\"{name}\": {{tflops: ..., tbps: ...}}}}); known: {', '.join(sorted(table))}")
