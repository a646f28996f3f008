"""kill_process_tree as SGLang has it: the scheduler subprocesses, then (with include_parent) this process."""

import os
import signal


def kill_process_tree(parent_pid: int, include_parent: bool = True) -> None:
    import sglang

    for engine in sglang.ENGINES:
        engine.scheduler.kill()
    if include_parent:
        os.kill(parent_pid, signal.SIGKILL)
