"""McNemar's exact two-sided p-values in exact integer arithmetic (Python's math.comb and
fractions), the reference test_mcnemar.c's committed values came from:
    p = min(1, 2 * sum_{i <= min(b, c)} C(b + c, i) / 2^(b + c))
usage: python3 mcnemar_reference.py   (prints one C initializer line per case)"""
from fractions import Fraction
from math import comb

CASES = [(0, 0), (1, 0), (0, 1), (5, 0), (3, 1), (10, 4), (12, 3), (7, 7), (9, 2), (40, 25),
         (100, 60), (2600, 2400), (2400, 2601), (2550, 2450), (3000, 2000), (50000, 49000)]


def mcnemar_p(b, c):
    n, k = b + c, min(b, c)
    term, total = 1, 1  # C(n, 0)
    for i in range(1, k + 1):
        term = term * (n - i + 1) // i
        total += term
    assert n > 10000 or total == sum(comb(n, i) for i in range(k + 1))
    return min(Fraction(1), Fraction(2 * total, 2 ** n))


for b, c in CASES:
    print("    {%d, %d, %r}," % (b, c, float(mcnemar_p(b, c))))
