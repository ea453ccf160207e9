"""The check counter the Python tests share: check(cond, what) prints and counts each failure,
finish() prints the count and returns the exit status (0 when every check passed, else 1)."""
import sys

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAILED:", what, file=sys.stderr)
    return cond


def finish():
    print(f"{failures} failed" if failures else "all checks passed")
    return 1 if failures else 0
