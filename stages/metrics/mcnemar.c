/* McNemar's exact test (see mcnemar.h). */
#include "stages/metrics/mcnemar.h"

#include <math.h>

double em_mcnemar_exact_p(int64_t b, int64_t c) {
    int64_t n = b + c, k = b < c ? b : c;
    if (n == 0) return 1.0;
    /* the largest term C(n, k) / 2^n (k <= n / 2), in logs */
    long double log_top = lgammal((long double)n + 1) - lgammal((long double)k + 1) -
                          lgammal((long double)(n - k) + 1) - (long double)n * logl(2.0L);
    /* sum over i <= k of C(n, i) / C(n, k): C(n, i - 1) = C(n, i) * i / (n - i + 1) */
    long double ratio = 1, total = 1;
    for (int64_t i = k; i >= 1; i--) {
        ratio *= (long double)i / (long double)(n - i + 1);
        total += ratio;
        if (ratio < total * 1e-22L) break;
    }
    long double log_p = logl(2.0L) + log_top + logl(total);
    return log_p >= 0 ? 1.0 : (double)expl(log_p);
}
