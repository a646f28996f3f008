"""Stage 4: the final dataset (`dataset`), the check that it matches the current config (`freshness`), the exports
for trainers (`exports`, with the reasoning split of `reasoning` and the manifest's `provenance`); `stage.run` is the
`shardgen merge` step."""
