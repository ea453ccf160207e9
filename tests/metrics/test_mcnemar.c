/* Unit test of McNemar's exact p-value (stages/metrics/mcnemar.c) against exact values from
 * integer arithmetic: each case's p as mcnemar_reference.py prints it (math.comb and fractions,
 * rounded once to a double), from tiny counts to b + c = 99000. */
#include <math.h>
#include <stdio.h>

#include "stages/metrics/mcnemar.h"
#include "test.h"

static const struct {
    long long b, c;
    double p;
} cases[] = {
    {0, 0, 1.0},
    {1, 0, 1.0},
    {0, 1, 1.0},
    {5, 0, 0.0625},
    {3, 1, 0.625},
    {10, 4, 0.1795654296875},
    {12, 3, 0.03515625},
    {7, 7, 1.0},
    {9, 2, 0.0654296875},
    {40, 25, 0.08168153394154005},
    {100, 60, 0.001953728034064342},
    {2600, 2400, 0.004883649737517518},
    {2400, 2601, 0.004677045349937089},
    {2550, 2450, 0.1614852223973769},
    {3000, 2000, 1.3002310005203771e-45},
    {50000, 49000, 0.0014980826229749737},
};

int main(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double p = em_mcnemar_exact_p(cases[i].b, cases[i].c);
        if (fabs(p - cases[i].p) > 1e-12 * cases[i].p)
            fprintf(stderr, "b %lld, c %lld: p %.17g, want %.17g\n", cases[i].b, cases[i].c, p,
                    cases[i].p);
        CHECK(fabs(p - cases[i].p) <= 1e-12 * cases[i].p);
        /* symmetric in b and c */
        CHECK(em_mcnemar_exact_p(cases[i].c, cases[i].b) == p);
    }
    /* far in the tail the p-value is below the smallest double: 0, not NaN */
    CHECK(em_mcnemar_exact_p(100000, 0) == 0);
    return test_finish();
}
