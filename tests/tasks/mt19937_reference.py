"""Writes mt19937_expected.json: what NumPy's legacy RandomState and CPython's random.Random draw
for a few seeds, the reference tests/tasks/test_mt19937.c holds stages/tasks/mt19937.c to.
Run with the test environment's python (tools/python-env: NumPy 1.24, CPython 3.11):
    python3 tests/tasks/mt19937_reference.py > tests/tasks/mt19937_expected.json"""
import json
import random
import sys

import numpy as np

SIZES = [1, 2, 5, 26, 100, 1000]
NUMPY_SEEDS = [0, 1, 42, 2**32 - 1]
PYTHON_SEEDS = [0, 1, 42, 2**32 - 1, 2**40 + 5]
# (n, k) pairs covering both branches of random.sample: the pool (n small beside k's set) and
# the set of selected indices.
SAMPLES = [(1, 1), (2, 2), (5, 3), (26, 5), (26, 26), (100, 10), (100, 100), (1000, 3),
           (1000, 1000)]

numpy_cases = []
for seed in NUMPY_SEEDS:
    for n in SIZES:
        numpy_cases.append({"seed": seed, "n": n,
                            "permutation": np.random.RandomState(seed).permutation(n).tolist()})
    # Two permutations in a row from one state, as make_nshot_dataset draws them.
    rs = np.random.RandomState(seed)
    first = rs.permutation(26).tolist()
    numpy_cases.append({"seed": seed, "n": 26, "after": 26, "first": first,
                        "permutation": rs.permutation(26).tolist()})

python_cases = []
for seed in PYTHON_SEEDS:
    words = random.Random(seed)
    python_cases.append({"seed": seed, "words": [words.getrandbits(32) for _ in range(4)]})
    for n, k in SAMPLES:
        python_cases.append({"seed": seed, "n": n, "k": k,
                             "sample": random.Random(seed).sample(range(n), k)})
    for n in SIZES:
        items = list(range(n))
        random.Random(seed).shuffle(items)
        python_cases.append({"seed": seed, "n": n, "shuffle": items})

json.dump({"python": sys.version.split()[0], "numpy": np.__version__,
           "numpy_cases": numpy_cases, "python_cases": python_cases}, sys.stdout,
          separators=(",", ":"))
sys.stdout.write("\n")
