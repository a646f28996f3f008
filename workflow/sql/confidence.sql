-- Per source: how sure the target was of its turns: of the per-turn mean and minimum chosen-token logprob (every
-- turn under capture.signal, on by default) and the mean top-k entropy (captured turns at k >= 1), the turns that
-- carry each and their p10, median, p90 and mean, to filter or weight turns by (a turn without them is counted in
-- turns only).
SELECT source, count(*) AS turns, count(logprob_mean) AS signal_turns, count(topk_entropy_mean) AS topk_turns,
       round(quantile_cont(logprob_mean, 0.1), 4) AS logprob_mean_p10,
       round(quantile_cont(logprob_mean, 0.5), 4) AS logprob_mean_p50,
       round(quantile_cont(logprob_mean, 0.9), 4) AS logprob_mean_p90,
       round(avg(logprob_mean), 4) AS logprob_mean_avg,
       round(quantile_cont(logprob_min, 0.1), 4) AS logprob_min_p10,
       round(quantile_cont(logprob_min, 0.5), 4) AS logprob_min_p50,
       round(quantile_cont(logprob_min, 0.9), 4) AS logprob_min_p90,
       round(quantile_cont(topk_entropy_mean, 0.1), 4) AS topk_entropy_p10,
       round(quantile_cont(topk_entropy_mean, 0.5), 4) AS topk_entropy_p50,
       round(quantile_cont(topk_entropy_mean, 0.9), 4) AS topk_entropy_p90
FROM turns
GROUP BY source ORDER BY source
