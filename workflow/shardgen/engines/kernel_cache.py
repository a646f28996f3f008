"""Point every compiled-kernel cache SGLang uses at one folder that outlives the job (`engine.cache_dir`), so a
restart after an OOM, a rerun and every shard after the first start warm.

The variables were read off SGLang 0.5.17's stack (sglang, sglang-kernel, flashinfer, tvm-ffi, torch): each is
read by the library at import or at compile time, so they are set before `import sglang`; the scheduler and its
workers are child processes and inherit them."""

import os
from pathlib import Path

CACHE_VARS = {
    "TRITON_CACHE_DIR": "triton",  # Triton JIT: the Mamba and attention kernels (~/.triton/cache)
    "TORCHINDUCTOR_CACHE_DIR": "inductor",  # torch.compile / piecewise CUDA graphs (/tmp/torchinductor_$USER)
    "SGLANG_CACHE_DIR": "sglang",  # SGLang's torch_compile_cache and FlashInfer autotune results (~/.cache/sglang)
    "FLASHINFER_WORKSPACE_BASE": "flashinfer",  # FlashInfer JIT modules and cubins, under .cache/flashinfer (~)
    "TVM_FFI_CACHE_DIR": "tvm-ffi",  # sglang-kernel's and FlashInfer's tvm-ffi JIT builds (~/.cache/tvm-ffi)
    "SGLANG_DG_CACHE_DIR": "deep_gemm",  # DeepGEMM kernels SGLang JIT-compiles (~/.cache/deep_gemm)
    "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR": "cute-dsl",  # CuTe-DSL flash-attention kernels
    "TORCH_EXTENSIONS_DIR": "torch_extensions",  # torch.utils.cpp_extension.load_inline builds
    "CUDA_CACHE_PATH": "cuda",  # the driver's PTX-to-SASS JIT cache (~/.nv/ComputeCache)
}


def resolve(cache_dir: str, results_dir: Path) -> Path:
    """A relative cache_dir lies under the results folder; an absolute one (a shared path on a cluster) as given."""
    path = Path(cache_dir)
    return path if path.is_absolute() else Path(results_dir) / path


def point_caches(cache_dir: Path, environ=os.environ) -> dict[str, str]:
    """Set every cache variable to a sub-folder of cache_dir (created) and return what was set."""
    cache_dir = Path(cache_dir).resolve()
    chosen = {var: str(cache_dir / sub) for var, sub in CACHE_VARS.items()}
    for path in chosen.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    environ.update(chosen)
    return chosen
