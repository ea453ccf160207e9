"""CLI tests of the runner: every bad recipe in tests/runner/bad/ gives exactly its expected
message and exit status 2 from `evalmesh validate` and `evalmesh run`, and leaves no run
directory; every recipe in recipes/ validates; a run writes the resolved recipe, the log and the
rank state, and never overwrites an earlier run, also on two ranks under mpirun; `dag`, `stages`
and `--help` print what they promise; `kind` and `after` are declared once, in the recipe schema,
and `after:` takes a name or a list; paths are relative to the file that wrote them; a missing
input file stops `perplexity` before a run directory exists; a recipe without a report warns
once; `perplexity` fills recipes/perplexity.yaml from getopt_long options.

Each bad file starts with comment lines: a description, `# expect: MESSAGE` where {file} stands
for the recipe path given to evalmesh and {dir} for its folder, and optionally `# args: ...`
(overrides after the recipe)."""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402

BIN = os.environ["EVALMESH_BIN"]
SRC = os.environ["EVALMESH_SOURCE_DIR"]
SHARED = os.environ.get("EVALMESH_SHARED_DATA", "")
HERE = os.path.join(SRC, "tests", "runner")
GOOD = os.path.join(HERE, "good", "runner_test.yaml")
NO_RESULTS = ("warning: {}: no stage writes results (add a report stage): nothing will be "
              "written but the run directory's log and state\n")



def evalmesh(args, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("EVALMESH_LOG", "EVALMESH_LOG_ALL_RANKS")}
    return subprocess.run([BIN] + args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def read_header(path):
    expect, args = None, []
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                break
            if line.startswith("# expect: "):
                expect = line[len("# expect: "):].rstrip("\n")
            elif line.startswith("# args: "):
                args = line[len("# args: "):].split()
    return expect, args


def test_bad_recipes():
    files = sorted(glob.glob(os.path.join(HERE, "bad", "*.yaml")))
    check(len(files) >= 20, f"found {len(files)} bad recipes")
    for path in files:
        expect, args = read_header(path)
        check(expect is not None, f"{path}: no '# expect:' line")
        if expect is None:
            continue
        message = expect.replace("{file}", path).replace("{dir}", os.path.dirname(path))
        for command in ("validate", "run"):
            with tempfile.TemporaryDirectory() as cwd:
                extra = ["--run-dir", os.path.join(cwd, "rd")] if command == "run" else []
                r = evalmesh([command, path] + args + extra, cwd)
                name = f"{command} {os.path.basename(path)}"
                check(r.returncode == 2, f"{name}: exit {r.returncode}, expected 2")
                check(r.stderr == f"error: {message}\n",
                      f"{name}: stderr {r.stderr!r}, expected {'error: ' + message!r}")
                check(r.stdout == "", f"{name}: stdout {r.stdout!r}")
                check(os.listdir(cwd) == [], f"{name}: left {os.listdir(cwd)} behind")
            # Without --run-dir, no runs/ either.
            if command == "run":
                with tempfile.TemporaryDirectory() as cwd:
                    r = evalmesh([command, path] + args, cwd)
                    check(r.returncode == 2 and os.listdir(cwd) == [],
                          f"run {os.path.basename(path)}: exit {r.returncode}, left "
                          f"{os.listdir(cwd)}")


def test_bad_arguments():
    with tempfile.TemporaryDirectory() as cwd:
        missing = os.path.join(cwd, "nothing-here.yaml")
        for command in ("validate", "run", "dag"):
            r = evalmesh([command, missing], cwd)
            check(r.returncode == 2, f"{command} missing file: exit {r.returncode}")
            check(r.stderr == f"error: cannot read '{missing}': No such file or directory\n",
                  f"{command} missing file: {r.stderr!r}")
        cases = [
            (["run"], "error: evalmesh run: missing RECIPE (see evalmesh run --help)\n"),
            (["validate"], "error: evalmesh validate: missing RECIPE (see evalmesh validate --help)\n"),
            (["dag"], "error: evalmesh dag: missing RECIPE (see evalmesh dag --help)\n"),
            (["run", GOOD, "--bogus"],
             "error: evalmesh run: unknown option '--bogus' (see evalmesh run --help)\n"),
            (["run", GOOD, "--log-level", "loud"],
             "error: evalmesh run: unknown log level 'loud' (error, warn, info, debug)\n"),
            (["dag", GOOD, "--svg"],
             "error: evalmesh dag: unknown option '--svg' (see evalmesh dag --help)\n"),
            (["stages", "extra"],
             "error: evalmesh stages: unexpected argument 'extra' (see evalmesh stages --help)\n"),
            # a mistyped command or option names the closest one
            (["rn", GOOD], "error: evalmesh: unknown command 'rn' (did you mean 'run'?) "
                           "(see evalmesh --help)\n"),
            (["frobnicate"], "error: evalmesh: unknown command 'frobnicate' (see evalmesh --help)\n"),
            (["--log-levl", "info", "stages"],
             "error: evalmesh: unknown option '--log-levl' (did you mean '--log-level'?) "
             "(see evalmesh --help)\n"),
            (["--log-level=loud", "stages"],
             "error: evalmesh: unknown log level 'loud' (error, warn, info, debug)\n"),
            (["dag", GOOD, "--dto"],
             "error: evalmesh dag: unknown option '--dto' (did you mean '--dot'?) "
             "(see evalmesh dag --help)\n"),
            (["dag", GOOD, "--dot=yes"],
             "error: evalmesh dag: option '--dot' takes no value (see evalmesh dag --help)\n"),
        ]
        for args, expected in cases:
            r = evalmesh(args, cwd)
            check(r.returncode == 2, f"{args}: exit {r.returncode}")
            check(r.stderr == expected, f"{args}: stderr {r.stderr!r}")
        check(os.listdir(cwd) == [], f"bad arguments left {os.listdir(cwd)}")


def test_log_level_precedence():
    """--log-level beats EVALMESH_LOG, which beats the recipe's log_level:, which beats info."""
    info_line = f"{GOOD}: 2 stages on 1 rank, run directory "
    cases = [  # (global options, run options, EVALMESH_LOG, recipe log_level, info lines shown)
        ([], [], None, "warn", False),
        (["--log-level", "info"], [], None, "warn", True),
        (["--log-level=info"], [], "error", "warn", True),
        ([], ["--log-level", "info"], "warn", "error", True),
        ([], [], "info", "warn", True),
        ([], [], "warn", "info", False),
        ([], [], None, "info", True),
        (["--log-level", "warn"], [], "info", "debug", False),
    ]
    for global_opts, run_opts, env_level, recipe_level, shown in cases:
        with tempfile.TemporaryDirectory() as cwd:
            env = {k: v for k, v in os.environ.items() if k != "EVALMESH_LOG"}
            if env_level:
                env["EVALMESH_LOG"] = env_level
            args = global_opts + ["run", GOOD, f"log_level={recipe_level}", "--run-dir",
                                  os.path.join(cwd, "rd")] + run_opts
            r = subprocess.run([BIN] + args, cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=300)
            name = f"EVALMESH_LOG={env_level} evalmesh {' '.join(args)}"
            check(r.returncode == 0, f"{name}: exit {r.returncode}: {r.stderr}")
            check((info_line in r.stderr) == shown,
                  f"{name}: info lines {'missing' if shown else 'shown'}: {r.stderr!r}")


def test_recipes_validate():
    recipes = sorted(glob.glob(os.path.join(SRC, "recipes", "*.yaml")))
    check(len(recipes) > 0, "no recipes in recipes/")
    have_shared = bool(SHARED) and os.path.isdir(SHARED)
    for path in recipes:
        with tempfile.TemporaryDirectory() as cwd:
            r = evalmesh(["validate", path], cwd)
            if r.returncode != 0 and not have_shared and "shared/data" in r.stderr:
                print(f"skipped {path}: needs {SHARED} ({r.stderr.strip()})")
                continue
            if r.returncode != 0 and "run tools/fetch-bigbench" in r.stderr:
                print(f"skipped {path}: needs BIG-bench's tasks ({r.stderr.strip()})")
                continue
            check(r.returncode == 0, f"validate {path}: exit {r.returncode}: {r.stderr}")
            check(re.fullmatch(re.escape(path) + r": ok \(\d+ stages?\)\n", r.stdout),
                  f"validate {path}: stdout {r.stdout!r}")
            check(os.listdir(cwd) == [], f"validate {path} left {os.listdir(cwd)}")
        # The first line lets editors check the recipe against the schema.
        with open(path) as f:
            first = f.readline()
        check(first == "# yaml-language-server: $schema=../schemas/recipe.schema.json\n",
              f"{path}: first line {first!r}")


def run_dirs(cwd):
    runs = os.path.join(cwd, "runs")
    return sorted(os.listdir(runs)) if os.path.isdir(runs) else []


def test_run_writes_run_directory():
    with tempfile.TemporaryDirectory() as cwd:
        r = evalmesh(["run", GOOD, "seed=7"], cwd)
        check(r.returncode == 0, f"run: exit {r.returncode}: {r.stderr}")
        dirs = run_dirs(cwd)
        check(len(dirs) == 1 and re.fullmatch(r"runner-test-\d{8}-\d{6}", dirs[0] if dirs else ""),
              f"run directories {dirs}")
        if len(dirs) != 1:
            return
        first = os.path.join(cwd, "runs", dirs[0])
        check(sorted(os.listdir(first)) == ["evalmesh.log", "invocation", "recipe.resolved.yaml",
                                              "state"],
              f"run directory holds {sorted(os.listdir(first))}")
        resolved_path = os.path.join(first, "recipe.resolved.yaml")
        with open(resolved_path) as f:
            resolved = yaml.safe_load(f)
        # override beats the recipe, which beats its include; defaults are filled in
        check(resolved.get("seed") == 7, f"resolved seed {resolved.get('seed')}")
        check(resolved.get("collective_timeout_s") == 60, f"resolved {resolved}")
        check(resolved.get("init_timeout_s") == 180, f"resolved {resolved}")
        check("include" not in resolved, f"include left in {resolved}")
        check(resolved.get("stages", {}).get("mesh") ==
              {"kind": "mesh", "after": ["env"], "dp": "auto", "tp": 1, "cp": 1,
               "backend": "auto", "count_calls": False}, f"resolved mesh {resolved.get('stages')}")
        # the resolved recipe is itself a recipe that validates
        r2 = evalmesh(["validate", resolved_path], cwd)
        check(r2.returncode == 0, f"validate resolved: {r2.stderr}")
        with open(os.path.join(first, "evalmesh.log")) as f:
            log = f.read()
        check("stage 'env' (env_check) done in" in log and "stage 'mesh' (mesh) done in" in log,
              f"log: {log!r}")
        check(os.path.isfile(os.path.join(first, "state", "rank-0.json")), "no state/rank-0.json")

        # A second run gets its own directory and leaves the first as it was.
        before = {n: open(os.path.join(first, n)).read() for n in ("recipe.resolved.yaml",)}
        r = evalmesh(["run", GOOD, "--quiet"], cwd)
        check(r.returncode == 0, f"second run: exit {r.returncode}: {r.stderr}")
        # --quiet prints warnings only: the recipe has no report stage
        check(r.stderr == NO_RESULTS.format(GOOD), f"--quiet printed {r.stderr!r}")
        dirs2 = run_dirs(cwd)
        check(len(dirs2) == 2 and dirs[0] in dirs2, f"after the second run: {dirs2}")
        if len(dirs2) == 2:
            second = [d for d in dirs2 if d != dirs[0]][0]
            # Within the same second the name gets -2.
            if second.startswith(dirs[0]):
                check(second == dirs[0] + "-2", f"second run directory {second}")
        check(open(os.path.join(first, "recipe.resolved.yaml")).read() ==
              before["recipe.resolved.yaml"], "the second run changed the first")


def test_run_dir_option():
    with tempfile.TemporaryDirectory() as cwd:
        rd = os.path.join(cwd, "out", "one")
        r = evalmesh(["run", GOOD, "--run-dir", rd], cwd)
        check(r.returncode == 0, f"--run-dir: exit {r.returncode}: {r.stderr}")
        check(os.path.isfile(os.path.join(rd, "recipe.resolved.yaml")), "--run-dir: no recipe")
        check(run_dirs(cwd) == [], "--run-dir also made runs/")
        r = evalmesh(["run", GOOD, "--run-dir", rd], cwd)
        check(r.returncode == 2, f"non-empty --run-dir: exit {r.returncode}")
        check(r.stderr == f"error: run directory '{rd}' exists and is not empty (--force writes "
                          "into it anyway)\n", f"non-empty --run-dir: {r.stderr!r}")
        r = evalmesh(["run", GOOD, "--run-dir", rd, "--force"], cwd)
        check(r.returncode == 0, f"--force: exit {r.returncode}: {r.stderr}")
        empty = os.path.join(cwd, "empty")
        os.mkdir(empty)
        r = evalmesh(["run", GOOD, "--run-dir", empty], cwd)
        check(r.returncode == 0, f"empty --run-dir: exit {r.returncode}: {r.stderr}")


def test_failed_run_log():
    """A failing stage's error says its level once: "error: " on stderr, "error" in the log."""
    with tempfile.TemporaryDirectory() as cwd:
        rd = os.path.join(cwd, "rd")
        r = evalmesh(["run", GOOD, 'stages.env.require={kernel: ">=99"}', "--run-dir", rd], cwd)
        message = "rank 0, stage 'env' (env_check): environment requirements not met:"
        check(r.returncode == 4, f"failing stage: exit {r.returncode}: {r.stderr}")
        check(f"\nerror: {message}\n" in r.stderr, f"failing stage: stderr {r.stderr!r}")
        with open(os.path.join(rd, "evalmesh.log")) as f:
            lines = f.read().splitlines()
        errors = [line.split(" ", 1)[1] for line in lines if " error " in line]
        check(errors == [f"error {message}"], f"failing stage: log {lines}")


def test_dag_and_stages():
    with tempfile.TemporaryDirectory() as cwd:
        r = evalmesh(["dag", GOOD], cwd)
        check(r.returncode == 0, f"dag: {r.stderr}")
        check(r.stdout ==
              f"{GOOD}: 2 stages in topological order\n"
              "    #  stage  kind       produces  reads\n"
              "    1  env    env_check  env       -\n"
              "    2  mesh   mesh       mesh      after: env\n"
              "collective stages, one at a time in this order: env, mesh\n", f"dag: {r.stdout!r}")
        r = evalmesh(["dag", GOOD, "--dot", "stages.mesh.after=[]"], cwd)
        check(r.stdout ==
              'digraph "runner-test" {\n  rankdir=LR;\n'
              '  node [shape=box, fontname="monospace"];\n'
              '  "env" [label="env\\nenv_check -> env", style=bold];\n'
              '  "mesh" [label="mesh\\nmesh -> mesh", style=bold];\n}\n', f"dag --dot: {r.stdout!r}")
        r = evalmesh(["dag", GOOD, "--dot"], cwd)
        check('  "env" -> "mesh" [style=dashed, label="after"];\n' in r.stdout,
              f"dag --dot: {r.stdout!r}")
        # options before operands, and global options as --name=value
        r2 = evalmesh(["--log-level=debug", "dag", "--dot", GOOD], cwd)
        check(r2.returncode == 0 and r2.stdout == r.stdout, f"dag --dot before RECIPE: {r2.stderr}")
        r = evalmesh(["stages"], cwd)
        check(r.returncode == 0, f"stages: {r.stderr}")
        kinds = sorted(os.path.basename(p)[:-2] for p in glob.glob(os.path.join(SRC, "stages", "kinds", "*.c")))
        listed = [line.split()[0] for line in r.stdout.splitlines() if line and line[0] != " "]
        check(listed == kinds, f"stages lists {listed}, stages/ has {kinds}")
        listed = evalmesh(["--help"], cwd).stdout.split("commands:\n")[1].split("\n\n")[0]
        commands = [line.split()[0] for line in listed.splitlines()]
        check({"run", "validate", "dag", "stages", "check-state"} <= set(commands),
              f"evalmesh --help lists {commands}")
        for command in commands:
            r = evalmesh([command, "--help"], cwd)
            check(r.returncode == 0 and r.stdout.startswith(f"usage: evalmesh {command}"),
                  f"{command} --help: {r.returncode} {r.stdout[:60]!r}")
        check(os.listdir(cwd) == [], f"dag/stages left {os.listdir(cwd)}")


def test_schemas():
    """Every stage kind has its schema, which allows `kind` (as a constant) and `after`."""
    kinds = sorted(os.path.basename(p)[:-2] for p in glob.glob(os.path.join(SRC, "stages", "kinds", "*.c")))
    schemas = sorted(os.path.basename(p)[:-len(".schema.json")]
                     for p in glob.glob(os.path.join(SRC, "schemas", "stages", "*.schema.json")))
    check(kinds == schemas, f"stage kinds {kinds} but stage schemas {schemas}")
    paths = [os.path.join(SRC, "schemas", "stages", k + ".schema.json") for k in schemas]
    for path in [os.path.join(SRC, "schemas", "recipe.schema.json")] + paths:
        with open(path) as f:
            schema = json.load(f)
        name = os.path.relpath(path, SRC)
        check(schema.get("$schema") == "https://json-schema.org/draft/2020-12/schema",
              f"{name}: $schema {schema.get('$schema')}")
        check(schema.get("$id", "").endswith(os.path.relpath(path, os.path.join(SRC, "schemas"))),
              f"{name}: $id {schema.get('$id')}")
        check(bool(schema.get("title")) and bool(schema.get("description")),
              f"{name}: needs a title and a description")
        if path in paths:
            # `kind` and `after` are declared once, in the recipe schema, for every stage
            props = schema.get("properties", {})
            check("kind" not in props and "after" not in props,
                  f"{name}: declares {[k for k in ('kind', 'after') if k in props]}")
            check("kind" not in schema.get("required", []), f"{name}: requires kind")
        else:
            stage = schema["properties"]["stages"]["additionalProperties"]
            check(sorted(stage.get("properties", {})) == ["after", "kind"],
                  f"{name}: a stage's own keys are {sorted(stage.get('properties', {}))}")


def test_after_forms():
    """`after:` names one stage (a string) or a list, for every kind: the recipe schema says so
    once, and the DAG and the run accept both."""
    with tempfile.TemporaryDirectory() as cwd:
        for value in ("env", "[env]"):
            r = evalmesh(["validate", GOOD, f"stages.mesh.after={value}"], cwd)
            check(r.returncode == 0 and r.stdout == f"{GOOD}: ok (2 stages)\n",
                  f"validate after={value}: exit {r.returncode}: {r.stderr}")
            rd = os.path.join(cwd, "rd" + str(len(value)))
            r = evalmesh(["run", GOOD, f"stages.mesh.after={value}", "--run-dir", rd], cwd)
            check(r.returncode == 0, f"run after={value}: exit {r.returncode}: {r.stderr}")
            with open(os.path.join(rd, "evalmesh.log")) as f:
                log = f.read()
            check(log.index("stage 'env' (env_check) done") < log.index("stage 'mesh' (mesh) done"),
                  f"run after={value}: log {log!r}")
        r = evalmesh(["dag", GOOD, "stages.mesh.after=env"], cwd)
        check("    2  mesh   mesh       mesh      after: env\n" in r.stdout, f"dag: {r.stdout!r}")
        r = evalmesh(["validate", GOOD, "stages.mesh.after=3"], cwd)
        check(r.returncode == 2 and "after" in r.stderr, f"after=3: {r.stderr!r}")


def test_recipe_relative_paths():
    """A path in a recipe is relative to the folder of the file that wrote it: an included file's
    model and dataset paths to that file, an override's to the working directory."""
    model = os.path.join(SHARED, "models", "stories260K.gguf")
    text = os.path.join(SHARED, "text", "tinystories_sample.txt")
    if not (os.path.isfile(model) and os.path.isfile(text)):
        print("skipped the recipe-relative paths: no shared data")
        return
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "top"))
        parts = os.path.join(tmp, "parts")
        os.makedirs(os.path.join(parts, "data"))
        os.symlink(model, os.path.join(parts, "m.gguf"))
        os.symlink(text, os.path.join(parts, "data", "t.txt"))
        with open(os.path.join(parts, "stages.yaml"), "w") as f:
            f.write("stages:\n"
                    "  m: {kind: model, path: m.gguf}\n"
                    "  d: {kind: dataset, tokenizer: m, path: data/t.txt}\n")
        top = os.path.join(tmp, "top", "r.yaml")
        with open(top, "w") as f:
            f.write("name: paths\ninclude: ../parts/stages.yaml\n")
        cwd = os.path.join(tmp, "top")
        r = evalmesh(["validate", top], cwd)
        check(r.returncode == 0, f"included paths: exit {r.returncode}: {r.stderr}")
        # the same text written in the top recipe is relative to top/, where there is no m.gguf
        with open(top, "w") as f:
            f.write("name: paths\nstages:\n  m: {kind: model, path: m.gguf}\n")
        r = evalmesh(["validate", top], cwd)
        check(r.returncode == 2 and r.stderr == f"error: {top}:3:26: stage 'm': path "
              f"{tmp}/top/m.gguf: No such file or directory\n", f"top-relative: {r.stderr!r}")
        # an override is relative to the working directory
        r = evalmesh(["validate", top, f"stages.m.path={os.path.relpath(model, tmp)}"], tmp)
        check(r.returncode == 0, f"override path: exit {r.returncode}: {r.stderr}")


def test_missing_inputs_leave_nothing():
    """`evalmesh perplexity` with a missing text or model file stops at the stage's init: exit 2,
    the message names the file, and no runs/ directory is made."""
    model = os.path.join(SRC, "recipes", "data", "demo-model.gguf")
    text = os.path.join(SRC, "recipes", "data", "demo.txt")
    with tempfile.TemporaryDirectory() as cwd:
        r = evalmesh(["perplexity", "-m", model, "-f", "nope.txt"], cwd)
        check(r.returncode == 2, f"perplexity -f nope.txt: exit {r.returncode}")
        check(r.stderr.endswith("stage 'data': path nope.txt: No such file or directory\n")
              and r.stderr.count("error:") == 1, f"perplexity -f nope.txt: {r.stderr!r}")
        r = evalmesh(["perplexity", "-m", "nope.gguf", "-f", text], cwd)
        check(r.returncode == 2, f"perplexity -m nope.gguf: exit {r.returncode}")
        check(r.stderr.endswith("stage 'model': path nope.gguf: No such file or directory\n"),
              f"perplexity -m nope.gguf: {r.stderr!r}")
        check(os.listdir(cwd) == [], f"perplexity with a missing input left {os.listdir(cwd)}")


def test_no_results_warning():
    """A recipe without a stage that writes results warns once, from validate and from run;
    with a report stage there is no warning."""
    with tempfile.TemporaryDirectory() as cwd:
        r = evalmesh(["validate", GOOD], cwd)
        check(r.returncode == 0 and r.stderr == NO_RESULTS.format(GOOD),
              f"validate without a report: {r.stderr!r}")
        r = evalmesh(["run", GOOD, "--run-dir", os.path.join(cwd, "rd")], cwd)
        check(r.returncode == 0 and r.stderr.count("warning:") == 1 and
              NO_RESULTS.format(GOOD) in r.stderr, f"run without a report: {r.stderr!r}")
        demo = os.path.join(SRC, "recipes", "demo.yaml")
        r = evalmesh(["validate", demo], cwd)
        check(r.returncode == 0 and r.stderr == "", f"validate with a report: {r.stderr!r}")


def perplexity_metrics(cwd, args, run_dir_args):
    """Runs evalmesh perplexity on the demo model and text; returns (exit status, stderr, the
    metrics of results.json without timings, or None)."""
    model = os.path.join(SRC, "recipes", "data", "demo-model.gguf")
    text = os.path.join(SRC, "recipes", "data", "demo.txt")
    r = evalmesh(["perplexity", "-m", model, "-f", text] + args + run_dir_args, cwd)
    rd = run_dir_args[0].split("=", 1)[1] if "=" in run_dir_args[0] else run_dir_args[1]
    path = os.path.join(rd, "results.json")
    if not os.path.exists(path):
        return r.returncode, r.stderr, None
    with open(path) as f:
        metrics = json.load(f)["metrics"]["ppl"]
    return r.returncode, r.stderr, {k: v["value"] for k, v in metrics.items() if not v.get("timing")}


def test_perplexity_cli():
    """evalmesh perplexity fills recipes/perplexity.yaml from getopt_long options: --name=VALUE
    works, -c 0 is the model's context length (512 for the demo model), --stride is refused
    unless the protocol is sliding, --precision sets the forward's precision (not with
    --kl-divergence), --no-mmap (the model stage's mmap: false) gives the same numbers, and
    --print-recipe prints a recipe that runs to the same numbers."""
    with tempfile.TemporaryDirectory() as cwd:
        rc, err, ref = perplexity_metrics(cwd, ["-c", "128"], ["--run-dir", os.path.join(cwd, "a")])
        check(rc == 0 and ref and ref["windows"] == 28, f"-c 128: exit {rc}: {err[-800:]} {ref}")
        rc, err, same = perplexity_metrics(cwd, ["--ctx-size=128"], [f"--run-dir={cwd}/b"])
        check(rc == 0 and same == ref, f"--ctx-size=128 --run-dir=: exit {rc}: {same} != {ref}")
        rc, err, in_memory = perplexity_metrics(cwd, ["-c", "128", "--no-mmap"],
                                                ["--run-dir", f"{cwd}/in-memory"])
        check(rc == 0 and in_memory == ref, f"--no-mmap: exit {rc}: {in_memory} != {ref}")
        rc, err, full = perplexity_metrics(cwd, ["-c", "512"], ["--run-dir", os.path.join(cwd, "c")])
        rc0, err0, model_ctx = perplexity_metrics(cwd, ["-c", "0"], ["--run-dir", f"{cwd}/d"])
        check(rc == 0 and rc0 == 0 and full and model_ctx == full and full["windows"] == 7,
              f"-c 0: exit {rc0}: {err0[-800:]} {model_ctx} != {full}")
        rc, err, sliding = perplexity_metrics(
            cwd, ["--protocol=sliding", "-c", "128", "--stride=32"], ["--run-dir", f"{cwd}/e"])
        check(rc == 0 and sliding and sliding["windows"] == 112,
              f"sliding: exit {rc}: {err[-800:]} {sliding}")
        for protocol in ("chunked", "rolling"):
            rc, err, res = perplexity_metrics(cwd, ["--protocol", protocol, "--stride", "64"],
                                              ["--run-dir", f"{cwd}/f"])
            check(rc == 2 and err == f"error: evalmesh perplexity: --stride applies to --protocol "
                  f"sliding only, not {protocol} (whose windows do not overlap)\n",
                  f"--stride with {protocol}: exit {rc}: {err!r}")
        check(not os.path.exists(f"{cwd}/f"), "--stride with chunked made a run directory")
        # --precision ggml: the demo model's matrices are F16, whose products ggml runs with the
        # activations rounded to fp16: the same windows, a perplexity a little off exact's,
        # recorded as precision ggml
        rc, err, ggml = perplexity_metrics(cwd, ["-c", "128", "--precision", "ggml"],
                                           ["--run-dir", f"{cwd}/ggml"])
        with open(f"{cwd}/ggml/results.json") as f:
            recorded = json.load(f)["model"]["precision"]
        moved = ggml and abs(ggml["token_ppl"] / ref["token_ppl"] - 1)
        check(rc == 0 and recorded == "ggml" and ggml["tokens"] == ref["tokens"] and
              0 < moved < 1e-3 and ", precision ggml, kernel " in err,
              f"--precision ggml: exit {rc}: {recorded} {ggml} (exact {ref}), moved {moved}")
        print(f"--precision ggml: token_ppl {ggml['token_ppl']:.6f}, exact {ref['token_ppl']:.6f}")
        rc, err, res = perplexity_metrics(cwd, ["--precision", "fast"], ["--run-dir", f"{cwd}/fast"])
        check(rc == 2 and "stage 'ppl': option 'precision' must be one of exact, ggml, bf16, got "
              "'fast'" in err, f"--precision fast: exit {rc}: {err!r}")
        model = os.path.join(SRC, "recipes", "data", "demo-model.gguf")
        rc, err, res = perplexity_metrics(cwd, ["--precision", "ggml", "--kl-divergence", model],
                                          ["--run-dir", f"{cwd}/kld"])
        check(rc == 2 and err == "error: evalmesh perplexity: --precision applies without "
              "--kl-divergence (the comparison runs both models exact)\n",
              f"--precision with --kl-divergence: exit {rc}: {err!r}")
        rc, err, res = perplexity_metrics(cwd, ["-c", "-3"], ["--run-dir", f"{cwd}/f"])
        check(rc == 2 and err == "error: evalmesh perplexity: --ctx-size needs a non-negative "
              "integer, not '-3'\n", f"-c -3: {rc} {err!r}")

        # --print-recipe: a recipe that validates and runs to the same numbers
        model = os.path.join(SRC, "recipes", "data", "demo-model.gguf")
        text = os.path.join(SRC, "recipes", "data", "demo.txt")
        r = evalmesh(["perplexity", "-m", model, "-f", text, "-c", "128", "--print-recipe"], cwd)
        check(r.returncode == 0 and r.stdout.startswith("# yaml-language-server"), f"{r.stderr}")
        printed = yaml.safe_load(r.stdout)
        check("mmap" not in printed["stages"]["model"], f"{printed['stages']['model']}")
        r_in_memory = evalmesh(["perplexity", "-m", model, "-f", text, "--no-mmap",
                                "--print-recipe"], cwd)
        check(yaml.safe_load(r_in_memory.stdout)["stages"]["model"].get("mmap") is False,
              f"--no-mmap --print-recipe: {r_in_memory.stdout} {r_in_memory.stderr}")
        check(printed["stages"]["data"] == {"kind": "dataset", "tokenizer": "model", "path": text,
                                            "format": "text", "protocol": "chunked", "n_ctx": 128},
              f"printed data stage {printed['stages']['data']}")
        saved = os.path.join(cwd, "saved.yaml")
        with open(saved, "w") as f:
            f.write(r.stdout)
        r = evalmesh(["run", saved, f"--run-dir={cwd}/g"], cwd)
        with open(os.path.join(cwd, "g", "results.json")) as f:
            metrics = json.load(f)["metrics"]["ppl"]
        again = {k: v["value"] for k, v in metrics.items() if not v.get("timing")}
        check(r.returncode == 0 and again == ref, f"the printed recipe: {again} != {ref}")


def test_two_ranks():
    mpirun = os.environ.get("EVALMESH_MPIRUN", "")
    if not mpirun:
        print("skipped the two-rank runs: no mpirun")
        return
    launch = [mpirun, "-np", "2", "--oversubscribe", BIN]
    with tempfile.TemporaryDirectory() as cwd:
        r = subprocess.run(launch + ["run", GOOD], cwd=cwd, capture_output=True, text=True,
                           timeout=300)
        check(r.returncode == 0, f"2 ranks: exit {r.returncode}: {r.stderr}")
        dirs = run_dirs(cwd)
        check(len(dirs) == 1, f"2 ranks made {dirs}")
        warnings = [line for line in r.stderr.splitlines() if "warning:" in line]
        check(warnings == ["[r0] " + NO_RESULTS.format(GOOD).rstrip("\n")],
              f"2 ranks: warnings {warnings}")
        if len(dirs) == 1:
            d = os.path.join(cwd, "runs", dirs[0])
            for name in ("evalmesh.log", "evalmesh.rank1.log", "state/rank-0.json",
                         "state/rank-1.json", "recipe.resolved.yaml"):
                check(os.path.isfile(os.path.join(d, name)), f"2 ranks: no {name}")
        # A bad recipe ends both ranks with exit 2 and one message, from rank 0.
        bad = os.path.join(HERE, "bad", "cycle.yaml")
        r = subprocess.run(launch + ["run", bad], cwd=cwd, capture_output=True, text=True,
                           timeout=300)
        check(r.returncode == 2, f"2 ranks, bad recipe: exit {r.returncode}")
        errors = [line for line in r.stderr.splitlines() if "error:" in line]
        check(errors == [f"[r0] error: {bad}:5:3: cycle: a -> b -> c -> a"],
              f"2 ranks, bad recipe: {errors}")
        check(len(run_dirs(cwd)) == 1, "2 ranks, bad recipe: made a run directory")


def gpu_present():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and "GPU" in r.stdout


def test_cuda_device_without_gpu():
    """`device: cuda` on a machine without a usable GPU fails at validation (validate and run,
    forward and compare stages, the forward also with its cuda-only weight storage options) with
    exit 2, naming the stage and cudaGetDeviceCount's message; a build without CUDA says so."""
    cuda_build = "nccl" in evalmesh(["--version"], HERE).stdout
    if cuda_build and gpu_present():
        print("skipped the no-GPU device: cuda checks: this machine has an NVIDIA GPU")
        return
    demo = os.path.join(SRC, "recipes", "demo.yaml")
    kld = os.path.join(SRC, "recipes", "quant_kld.yaml")
    weights = ["stages.ppl.f32_weights=bfloat16", "stages.ppl.quantized_weights=quantized"]
    recipes = [(demo, "ppl", []), (demo, "ppl", weights)]
    if os.path.isfile(os.path.join(SRC, "..", "shared", "data", "models", "stories260K.gguf")):
        recipes.append((kld, "kld", []))  # its model is ../shared's stories260K
    else:
        print("skipped the compare stage's device: cuda check: no shared data beside the checkout")
    for recipe, stage, options in recipes:
        for command in ("validate", "run"):
            with tempfile.TemporaryDirectory() as cwd:
                extra = ["--run-dir", os.path.join(cwd, "rd")] if command == "run" else []
                r = evalmesh([command, recipe, f"stages.{stage}.device=cuda"] + options + extra,
                             cwd)
                name = f"{command} {os.path.basename(recipe)} device=cuda"
                check(r.returncode == 2, f"{name}: exit {r.returncode}, expected 2")
                if cuda_build:
                    want = (rf"error: <command line>:1:1: stage '{stage}': device cuda: no CUDA "
                            r"device \(cudaGetDeviceCount: [^)]+\)\n")
                else:
                    want = (rf"error: <command line>:1:1: stage '{stage}': device cuda: this "
                            r"evalmesh was built without the CUDA toolkit \(configure with "
                            r"/usr/local/cuda present and EVALMESH_CUDA=ON\)\n")
                check(re.fullmatch(want, r.stderr) is not None, f"{name}: stderr {r.stderr!r}")
                check(os.listdir(cwd) == [], f"{name}: left {os.listdir(cwd)} behind")


test_bad_recipes()
test_cuda_device_without_gpu()
test_bad_arguments()
test_log_level_precedence()
test_recipes_validate()
test_run_writes_run_directory()
test_run_dir_option()
test_failed_run_log()
test_dag_and_stages()
test_schemas()
test_after_forms()
test_recipe_relative_paths()
test_missing_inputs_leave_nothing()
test_no_results_warning()
test_perplexity_cli()
test_two_ranks()
sys.exit(finish())
