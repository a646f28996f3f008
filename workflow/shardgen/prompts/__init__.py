"""Stage 1 and 2: sources read, rows normalized to chat messages, rendered and tokenized once, deduplicated and
rejected with reasons (`stage`); then length-balanced shards (`split`)."""
