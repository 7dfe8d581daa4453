"""Mutation testing of the core modules with mutmut, each module against its own unit tests (README.md, "Tests").

mutmut 3 only finds code to mutate under `./`, `src/` or `source/` of the directory it runs in, and names
mutants after the module path it sees there; the workspace keeps each service under `services/<name>/src/`.
So every module gets a staging directory of its own (`mutate/work/<module>/`): its package under `src/`,
a copy of `tests/`, and a pyproject.toml holding the workspace's pytest options plus the `[tool.mutmut]`
section naming the one file to mutate and the tests that cover it. mutmut runs there (its mutants in
parallel, one per core), and the results of every module go to one report.

    uv run python mutate/run.py              # every core module → mutate/report.md
    uv run python mutate/run.py --smoke      # one small module, quick enough for CI
    uv run python mutate/run.py --only ingress.ratelimit runner.outcome
    uv run python mutate/run.py --collect    # the report from every module's last result, nothing run
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "mutate" / "work"
EQUIVALENT = REPO / "mutate" / "equivalent.toml"


@dataclass(frozen=True)
class CoreModule:
    name: str  # how the report and --only call it
    package_dir: str  # the package the module belongs to, relative to the repo
    module: str  # the file to mutate, relative to package_dir
    tests: tuple[str, ...]  # the unit tests that state its behaviour, relative to the repo


def _svc(service: str, package: str) -> str:
    return f"services/{service}/src/{package}"


INGRESS, RUNNER = _svc("ingress", "agentstream_ingress"), _svc("agent-runner", "agentstream_runner")
PERSISTENCE, DELIVERY = _svc("persistence", "agentstream_persistence"), _svc("delivery", "agentstream_delivery")
# The deliverer's tests, by behaviour (deliverer_harness.py holds what they share).
DELIVERER_TESTS = (
    "tests/unit/delivery/test_deliverer.py",
    "tests/unit/delivery/test_deliverer_drafts.py",
    "tests/unit/delivery/test_deliverer_notices.py",
    "tests/unit/delivery/test_deliverer_recovery.py",
)

CORE_MODULES: tuple[CoreModule, ...] = (
    CoreModule("ingress.pipeline", INGRESS, "pipeline.py", ("tests/unit/ingress/test_pipeline.py",)),
    CoreModule("ingress.authz", INGRESS, "authz.py", ("tests/unit/ingress/test_authz.py",)),
    CoreModule("ingress.ratelimit", INGRESS, "ratelimit.py", ("tests/unit/ingress/test_ratelimit.py",)),
    CoreModule("ingress.store (dedupe)", INGRESS, "store.py", ("tests/unit/ingress/test_store.py",)),
    CoreModule(
        "runner.pipeline",
        RUNNER,
        "pipeline.py",
        (
            "tests/unit/runner/test_pipeline.py",
            "tests/unit/runner/test_ending.py",
            "tests/unit/runner/test_history.py",
            "tests/unit/runner/test_hooks.py",
        ),
    ),
    CoreModule("runner.outcome", RUNNER, "outcome.py", ("tests/unit/runner/test_outcome.py",)),
    CoreModule("runner.conversations.owner", RUNNER, "conversations/owner.py", ("tests/unit/runner/conversations/",)),
    CoreModule(
        "runner.connectors.resolve", RUNNER, "connectors/resolve.py", ("tests/unit/runner/connectors/test_resolve.py",)
    ),
    CoreModule(
        "runner.connectors.retry",
        RUNNER,
        "connectors/retry.py",
        (
            "tests/unit/runner/connectors/test_retry.py",
            "tests/unit/runner/connectors/test_openai_connector.py",
            "tests/unit/runner/connectors/test_anthropic_connector.py",
        ),
    ),
    CoreModule(
        "persistence.buffers",
        PERSISTENCE,
        "buffers.py",
        ("tests/unit/persistence/test_buffers.py", "tests/unit/persistence/test_resume_rows.py"),
    ),
    CoreModule("persistence.flusher", PERSISTENCE, "flusher.py", ("tests/unit/persistence/test_flusher.py",)),
    CoreModule(
        "delivery.stream_machine",
        DELIVERY,
        "stream_machine.py",
        ("tests/unit/delivery/test_stream_machine.py", "tests/unit/delivery/test_stream_machine_endings.py"),
    ),
    CoreModule("delivery.splitting", DELIVERY, "splitting.py", ("tests/unit/delivery/test_splitting.py",)),
    CoreModule(
        "delivery.ledger",
        DELIVERY,
        "ledger.py",
        (
            "tests/unit/delivery/test_ledger.py",
            *DELIVERER_TESTS,
            "tests/unit/delivery/test_stream_actor.py",
        ),
    ),
    CoreModule(
        "delivery.deliverer",
        DELIVERY,
        "deliverer.py",
        (*DELIVERER_TESTS, "tests/unit/delivery/test_stream_actor.py"),
    ),
)
SMOKE = ("ingress.ratelimit",)
# Every core module must kill at least this share of its non-equivalent mutants, or the run fails.
TARGET = 0.90
# Lines not mutated: what a log line says is for people reading logs, and no unit test pins its wording.
NOT_MUTATED = [r"\b\w*log\.(debug|info|warning|error|exception)\("]

# mutmut's exit codes per mutant (mutmut.stats.status_by_exit_code), folded into the report's columns.
KILLED_CODES = {1, 3, 37}
SURVIVED_CODES = {0}
TIMEOUT_CODES = {36, 24, -24, 152, 255}


@dataclass(frozen=True)
class Survivor:
    mutant: str
    line: int | None
    removed: str
    added: str
    equivalent_because: str | None


@dataclass
class ModuleResult:
    module: CoreModule
    seconds: float = 0.0
    missing: bool = False
    error: str = ""
    killed: int = 0
    timed_out: int = 0
    other: int = 0
    survivors: list[Survivor] = field(default_factory=list)

    @property
    def mutants(self) -> int:
        return self.killed + self.timed_out + self.other + len(self.survivors)

    @property
    def score(self) -> float | None:
        """Killed or timed out, of the mutants not shown equivalent."""
        counted = self.mutants - sum(1 for s in self.survivors if s.equivalent_because)
        return None if counted == 0 else (self.killed + self.timed_out) / counted


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def _staging_pyproject(core: CoreModule) -> str:
    pytest_options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    pytest_options = {**pytest_options, "testpaths": ["tests/unit"]}
    package = Path(core.package_dir).name
    mutmut = {
        "source_paths": [f"src/{package}"],
        "only_mutate": [f"src/{package}/{core.module}"],
        "pytest_add_cli_args_test_selection": list(core.tests),
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-q"],
        "do_not_mutate_patterns": NOT_MUTATED,
        "use_git_change_detection": False,  # the staging directory is no git checkout
    }
    lines = ["[tool.pytest.ini_options]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in pytest_options.items()]
    lines += ["", "[tool.mutmut]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in mutmut.items()]
    return "\n".join(lines) + "\n"


def _stage(core: CoreModule) -> Path:
    stage = WORK / core.name.split(" ")[0]
    shutil.rmtree(stage, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    package = REPO / core.package_dir
    shutil.copytree(package, stage / "src" / package.name, ignore=ignore)
    shutil.copytree(REPO / "tests", stage / "tests", ignore=ignore)
    (stage / "pyproject.toml").write_text(_staging_pyproject(core))
    return stage


def _mutmut(stage: Path, *args: str) -> subprocess.CompletedProcess[str]:
    mutmut = Path(sys.executable).with_name("mutmut")
    return subprocess.run([str(mutmut), *args], cwd=stage, capture_output=True, text=True)


def _function_lines(source: str) -> dict[str, tuple[int, int]]:
    """Each function's first and last line, by mutmut's mangled name (`x_f`, `xǁClassǁmethod`)."""
    spans: dict[str, tuple[int, int]] = {}
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            spans[f"x_{node.name}"] = (node.lineno, node.end_lineno or node.lineno)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    spans[f"xǁ{node.name}ǁ{item.name}"] = (item.lineno, item.end_lineno or item.lineno)
    return spans


def _equivalents() -> list[dict[str, str]]:
    if not EQUIVALENT.exists():
        return []
    return list(tomllib.loads(EQUIVALENT.read_text()).get("equivalent", []))


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


# mutmut's own diff of a mutant (what `mutmut show` prints), for many mutants in one process.
_DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
path, names = sys.argv[1], json.loads(sys.stdin.read())
print(json.dumps({name: get_diff_for_mutant(name, path=path) for name in names}))
"""


def _diffs(stage: Path, core: CoreModule, mutants: list[str]) -> dict[str, str]:
    if not mutants:
        return {}
    path = f"src/{Path(core.package_dir).name}/{core.module}"
    done = subprocess.run(
        [sys.executable, "-c", _DIFFS, path], cwd=stage, input=json.dumps(mutants), capture_output=True, text=True
    )
    if done.returncode != 0:  # fall back to one `mutmut show` per mutant
        return {m: _mutmut(stage, "show", m).stdout for m in mutants}
    diffs: dict[str, str] = json.loads(done.stdout)
    return diffs


def _survivor(core: CoreModule, mutant: str, diff_text: str, source_lines: list[str], spans: dict) -> Survivor:
    diff = diff_text.splitlines()
    removed = [d[1:].strip() for d in diff if d.startswith("-") and not d.startswith("---")]
    added = [d[1:].strip() for d in diff if d.startswith("+") and not d.startswith("+++")]
    old, new = (removed[0] if removed else ""), (added[0] if added else "")
    function = mutant.rsplit(".", 1)[-1].split("__mutmut_")[0]
    first, last = spans.get(function, (1, len(source_lines)))
    line = next((n for n in range(first, last + 1) if old and source_lines[n - 1].strip() == old), None)
    return Survivor(mutant, line, old, new, _equivalent_because(core, line, old, new))


def _equivalent_because(core: CoreModule, line: int | None, old: str, new: str) -> str | None:
    return next(
        (
            e["why"]
            for e in _equivalents()
            if e["module"] == core.name
            and e["from"] == old
            and new in _as_list(e["to"])
            and e.get("line", line) == line
        ),
        None,
    )


def _saved(core: CoreModule) -> Path:
    return WORK / core.name.split(" ")[0] / "result.json"


def save(result: ModuleResult) -> None:
    fields = {k: v for k, v in vars(result).items() if k not in ("module", "survivors")}
    survivors = [[s.mutant, s.line, s.removed, s.added] for s in result.survivors]
    _saved(result.module).parent.mkdir(parents=True, exist_ok=True)
    _saved(result.module).write_text(json.dumps({**fields, "survivors": survivors}))


def load(core: CoreModule) -> ModuleResult:
    """The module's last measured result (equivalents re-read, so a new entry needs no new run)."""
    path = _saved(core)
    if not path.exists():
        return ModuleResult(core, error="not measured: run it with --only")
    saved = json.loads(path.read_text())
    survivors = [
        Survivor(m, line, old, new, _equivalent_because(core, line, old, new))
        for m, line, old, new in saved.pop("survivors")
    ]
    return ModuleResult(core, survivors=survivors, **saved)


def run_module(core: CoreModule, children: int) -> ModuleResult:
    result = ModuleResult(core)
    source_file = REPO / core.package_dir / core.module
    if not source_file.exists():
        result.missing = True
        return result
    began = time.monotonic()
    stage = _stage(core)
    done = _mutmut(stage, "run", "--max-children", str(children))
    result.seconds = time.monotonic() - began
    metas = list((stage / "mutants").rglob(f"{Path(core.module).name}.meta"))
    if not metas:
        result.error = (done.stdout + done.stderr)[-2000:]
        return result
    codes: dict[str, int | None] = json.loads(metas[0].read_text())["exit_code_by_key"]
    source = source_file.read_text()
    spans, source_lines = _function_lines(source), source.splitlines()
    ordered = sorted(codes.items(), key=lambda kv: _mutant_order(kv[0]))
    diffs = _diffs(stage, core, [mutant for mutant, code in ordered if code in SURVIVED_CODES])
    for mutant, code in ordered:
        if code in KILLED_CODES:
            result.killed += 1
        elif code in TIMEOUT_CODES:
            result.timed_out += 1
        elif code in SURVIVED_CODES:
            result.survivors.append(_survivor(core, mutant, diffs[mutant], source_lines, spans))
        else:
            result.other += 1  # no tests ran it, skipped or suspicious: neither killed nor survived
    return result


def _mutant_order(mutant: str) -> tuple[str, int]:
    function, _, number = mutant.rpartition("__mutmut_")
    return function, int(number) if number.isdigit() else 0


def report(results: list[ModuleResult], command: str) -> str:
    out = [
        "# Mutation testing report",
        "",
        f"Made by `{command}` (mutmut {_mutmut_version()}); each module against its own unit tests.",
        "Score: killed or timed out, of the mutants not shown equivalent (mutate/equivalent.toml).",
        "Log calls are not mutated (`NOT_MUTATED` in mutate/run.py). Not run: no test of the module reaches it (or skipped, suspicious).",
        "",
        f"Target: at least {TARGET:.0%} in every module; a module below it fails the run.",
        "",
        "| module | mutants | killed | survived | equivalent | timed out | not run | score | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.missing or r.error:
            state = (
                "file missing (moved?)"
                if r.missing
                else r.error
                if r.error.startswith("not measured")
                else "mutmut failed"
            )
            out.append(f"| {r.module.name} | {state} | | | | | | | |")
            continue
        score = "–" if r.score is None else f"{r.score:.0%}"
        equivalent = sum(1 for s in r.survivors if s.equivalent_because)
        survived = len(r.survivors) - equivalent
        row = [r.mutants, r.killed, survived, equivalent, r.timed_out, r.other, score, f"{r.seconds:.0f}"]
        out.append(f"| {r.module.name} | " + " | ".join(str(v) for v in row) + " |")
    for r in results:
        if r.error and not r.error.startswith("not measured"):
            out += ["", f"## {r.module.name}: mutmut failed", "", "```", r.error, "```"]
        if not r.survivors:
            continue
        out += ["", f"## {r.module.name}: survivors", ""]
        path = f"{r.module.package_dir}/{r.module.module}"
        for s in r.survivors:
            where = f"{path}:{s.line}" if s.line else path
            note = f" — equivalent: {s.equivalent_because}" if s.equivalent_because else ""
            out.append(f"- `{where}` `{s.removed}` → `{s.added}` ({s.mutant.rsplit('.', 1)[-1]}){note}")
    return "\n".join(out) + "\n"


def _mutmut_version() -> str:
    from importlib.metadata import version

    return version("mutmut")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help=f"only {', '.join(SMOKE)}")
    parser.add_argument("--only", nargs="+", metavar="MODULE", help="these core modules (names as in the report)")
    parser.add_argument("--report", type=Path, default=REPO / "mutate" / "report.md")
    parser.add_argument(
        "--collect",
        action="store_true",
        help="run nothing: report every module's last result (mutate/work/*/result.json)",
    )
    parser.add_argument("--children", type=int, default=os.cpu_count() or 1, help="mutants run in parallel")
    args = parser.parse_args()
    names = SMOKE if args.smoke else args.only
    chosen = [m for m in CORE_MODULES if names is None or m.name.split(" ")[0] in names or m.name in names]
    if not chosen:
        parser.error(f"no core module named {names}; known: {[m.name for m in CORE_MODULES]}")
    results = []
    for core in chosen:
        if args.collect:
            results.append(load(core))
            continue
        print(f"mutating {core.name} ...", flush=True)
        result = run_module(core, args.children)
        save(result)
        results.append(result)
        print(f"  {result.mutants} mutants, {result.killed} killed, {len(result.survivors)} survived", flush=True)
    command = "make mutate-smoke" if args.smoke else "make mutate" if names is None else " ".join(sys.argv)
    if args.collect:
        command += " (each module's last run: mutate/run.py --only <module>)"
    args.report.write_text(report(results, command))
    print(f"report: {args.report}")
    failed = [r.module.name for r in results if r.error or r.missing]
    if failed:
        print(f"mutmut failed or the file is missing for {failed}: see the report", file=sys.stderr)
    weak = [f"{r.module.name} ({r.score:.0%})" for r in results if r.score is not None and r.score < TARGET]
    if weak:
        print(f"below the {TARGET:.0%} target: {', '.join(weak)}", file=sys.stderr)
    return 1 if failed or weak else 0


if __name__ == "__main__":
    sys.exit(main())
