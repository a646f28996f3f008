"""Stage 3: one shard on its GPUs (`shard`): the GPU lease, the bounded async window (`driver`), typed turn
requests (`turns`), the shard's checkpoint and all it knows of its parts (`checkpoint`), an attempt's life
(`attempts`); `reset` starts a shard over."""
