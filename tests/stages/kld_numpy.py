"""llama.cpp's `perplexity --kl-divergence` statistics from per-token values, written here in
NumPy (float64) from llama.cpp's formulas: the independent reference test_compare.py (from NumPy
forwards) and test_perplexity_kld.py (from the compare stage's per-token records) hold the compare
stage's metrics to."""
import math

import numpy as np


def llama_stats(nll_base, nll, kld, dp, same):
    """llama.cpp's --kl-divergence statistics from per-token values (float64)."""
    n = len(nll)

    def mean_unc(x):
        f = x.mean()
        v = (x * x).mean() - f * f
        return f, math.sqrt(v / (n - 1)) if v > 0 and n > 10 else 0.0

    lq, lq_u = mean_unc(nll)
    lb, lb_u = mean_unc(nll_base)
    cov = ((nll * nll_base).mean() - lq * lb) / (n - 1)
    ratio_u = math.sqrt(lq_u ** 2 + lb_u ** 2 - 2 * cov)
    ppl, ppl_b = math.exp(lq), math.exp(lb)
    mse, mse_u = mean_unc(dp * dp)
    s = {"ppl": (ppl, ppl * lq_u), "ppl_base": (ppl_b, ppl_b * lb_u),
         "ln_ppl_ratio": (lq - lb, ratio_u), "ppl_ratio": (math.exp(lq - lb), math.exp(lq - lb) * ratio_u),
         "ppl_diff": (ppl - ppl_b, math.sqrt((ppl * lq_u) ** 2 + (ppl_b * lb_u) ** 2 - 2 * ppl * ppl_b * cov)),
         "ln_ppl_correlation": (cov / (lq_u * lb_u), None), "kld_mean": mean_unc(kld),
         "dp_mean": mean_unc(dp), "dp_rms": (math.sqrt(mse), 0.5 * mse_u / math.sqrt(mse)),
         "same_top": (same.mean(), math.sqrt(same.mean() * (1 - same.mean()) / (n - 1))),
         "kld_max": (kld.max(), None), "kld_min": (kld.min(), None),
         "dp_max": (dp.max(), None), "dp_min": (dp.min(), None)}
    for at, name in ((99.9, "p99_9"), (99, "p99"), (95, "p95"), (90, "p90"), (50, "p50"),
                     (10, "p10"), (5, "p05"), (1, "p01")):
        s["kld_" + name] = (np.percentile(kld, at), None)
    for at, name in ((99.9, "p99_9"), (99, "p99"), (95, "p95"), (90, "p90"), (75, "p75"),
                     (50, "p50"), (25, "p25"), (10, "p10"), (5, "p05"), (1, "p01"), (0.1, "p00_1")):
        s["dp_" + name] = (np.percentile(dp, at), None)
    return s
