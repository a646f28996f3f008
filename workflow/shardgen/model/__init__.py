"""The target model as shardgen sees it: its tokenizer, chat template, stop ids and the hashes every gen_key carries
(`target`), the chat template rendered and tokenized in batches (`chat`), and the demo's tiny model (`demo`)."""
