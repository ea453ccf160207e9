"""What the command-line generation tests share: the shared data's stories260K (the test skips,
exit 77, without it) and a committed reference of this folder."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def stories260k():
    """The path of stories260K.gguf; exits 77 (skipped) when the shared data lacks it."""
    path = os.path.join(os.environ.get("EVALMESH_SHARED_DATA", ""), "models", "stories260K.gguf")
    if not os.path.isfile(path):
        print(f"skipped: {path} absent")
        sys.exit(77)
    return path


def reference(name):
    """The committed JSON file `name` of tests/generate."""
    with open(os.path.join(HERE, name)) as f:
        return json.load(f)
