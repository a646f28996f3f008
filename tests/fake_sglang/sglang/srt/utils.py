"""kill_process_tree as SGLang has it: the scheduler subprocesses, then (with include_parent) this process; and
get_device_memory_capacity: the GPU's memory in MiB (FAKE_SGLANG_GPU_MIB), None without one, as on a CPU host."""

import os
import signal


def kill_process_tree(parent_pid: int, include_parent: bool = True) -> None:
    import sglang

    for engine in sglang.ENGINES:
        engine.scheduler.kill()
    if include_parent:
        os.kill(parent_pid, signal.SIGKILL)


def get_device_memory_capacity(device: str | None = None) -> float | None:
    mib = os.environ.get("FAKE_SGLANG_GPU_MIB")
    return float(mib) if mib else None
