"""Stage 4: the final dataset (`dataset`), the check that it matches the current config (`freshness`) and the exports for trainers (`exports`)."""
