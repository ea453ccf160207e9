"""The check counter the Python tests share: check(cond, what, detail) prints and counts each
failure, check_equal(got, want, what) does the same for a comparison and shows both sides,
failed() says whether any check failed so far, and finish() prints the count and returns the exit
status (0 when every check passed, else 1)."""
import sys

failures = 0


def check(cond, what, detail=""):
    global failures
    if not cond:
        failures += 1
        print("FAILED:", what, *([detail] if detail != "" else []), file=sys.stderr)
    return cond


def check_equal(got, want, what):
    return check(got == want, what, "\n  got  %s\n  want %s" % (got, want))


def failed():
    return failures > 0


def finish():
    print(f"{failures} failed" if failures else "all checks passed")
    return 1 if failures else 0
