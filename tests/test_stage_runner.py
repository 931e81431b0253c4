"""One runner of stages (``credo.generation.stage.StageRunner``): plan, one cached call of
each role's executor, failed units into ``incomplete``, read. On one executor
(``StageRunner.on``) and over a model pool (the pipeline's ``StageDriver``, which extends
it) it gives the generations, cache rows and ledger counts computed here by hand from the
scripted model's responder and the key and seed functions; a failed request leaves its
unit incomplete and nothing of it cached; and no other module plans, executes and reads
a stage itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from credo.errors import RequestsFailed
from credo.generation.executor import Executor, PlannedRequest
from credo.generation.pool import JUDGE, MODEL, ModelPool
from credo.generation.stage import Generated, Stage, StagePlan, StageRunner
from credo.generation.store import GenerationStore, request_key, sample_seed
from credo.kernels.registry import KernelContext
from credo.models.scripted import ScriptedModel
from credo.pipeline.stages import StageDriver
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.grading import GradingContext
from credo.types import GenerationError, GenerationRequest, Message, SamplingParams

SRC = Path(__file__).resolve().parents[1] / "src" / "credo"


def _request(prompt: str) -> GenerationRequest:
    return GenerationRequest(messages=(Message(role="user", content=prompt),),
                             params=SamplingParams(temperature=1.0, max_tokens=8))


def _respond(name: str):
    def respond(messages, seed):
        return f"{name} says {messages[-1].content} at {seed}"
    return respond


class _Failing(ScriptedModel):
    """A scripted model whose reply to a prompt containing ``bad`` is malformed (a
    failure of the request, every pass)."""

    def generate(self, requests):
        for index, request in enumerate(requests):
            if "bad" in request.messages[-1].content:
                yield index, GenerationError("malformed reply", index, kind="malformed_reply")
                continue
            with self._lock:
                self.calls += 1
                self.samples += request.n
            yield index, [self.sample(request, j) for j in range(request.n)]


class _Prompts(Stage):
    """Per unit, one request of ``n`` samples per prompt of ``items[unit]``; a prompt
    ``"<text>@<stage>"`` counts under ledger stage ``<stage>``. Reads every sample's
    text, per unit and request."""

    description = "prompts"

    def __init__(self, name: str, role: str, n: int) -> None:
        self.name, self.role, self.n = name, role, n
        self.planned = 0

    def plan(self, items: dict[str, list[str]], context: object = None) -> StagePlan:
        self.planned += 1
        out: StagePlan = {}
        for unit, prompts in items.items():
            out[unit] = []
            for p in prompts:
                text, _, own = p.partition("@")
                out[unit].append(PlannedRequest(_request(f"{self.name} {text}"), self.n,
                                                stage=f"{own} ({self.name})" if own else ""))
        return out

    def read(self, generations: Generated) -> dict[str, list[list[str]]]:
        return {unit: [[g.text for g in gens] for gens in per]
                for unit, per in generations.items()}


def _expected_texts(model: ScriptedModel, stage: _Prompts, prompts: list[str],
                    run_seed: int = 0) -> list[list[str]]:
    """The texts of each prompt's samples by hand: sample j of a request is the
    responder's reply at seed ``sample_seed(request_key(...), j)``."""
    respond = _respond(model.name)
    out = []
    for p in prompts:
        req = _request(f"{stage.name} {p.partition('@')[0]}")
        key = request_key(model.identity, req, run_seed)
        out.append([respond(req.messages, sample_seed(key, j)) for j in range(stage.n)])
    return out


ITEMS = {"a": ["one", "two@own stage"], "b": ["three"], "c": []}


def _runs(tmp_path, how: str):
    """Two stages (two roles) through the runner ``how`` builds, run twice on one cache:
    (model, judge, runner, stages, what the first and the second run read)."""
    model = ScriptedModel(_respond("m"), name="m")
    judge = ScriptedModel(_respond("j"), name="j")
    if how == "driver":
        pool = ModelPool(cache_path=tmp_path / "c.sqlite", show_progress=False)
        pool.assign(MODEL, model=model)
        pool.assign(JUDGE, model=judge)
        runner: StageRunner = StageDriver(pool)
        ledger = pool.ledger
        judge_model = judge
    else:  # one executor: every role on it
        ex = Executor(model, GenerationStore(tmp_path / "c.sqlite"), show_progress=False)
        runner = StageRunner.on(ex)
        ledger = ex.ledger
        judge_model = model
    first = _Prompts("alpha", MODEL, 3), _Prompts("beta", JUDGE, 2)
    got = runner.run(first, ITEMS)
    again = _Prompts("alpha", MODEL, 3), _Prompts("beta", JUDGE, 2)
    got_again = runner.run(again, ITEMS)
    (pool if how == "driver" else ex.store).close()
    return model, judge_model, runner, ledger, first, got, got_again


@pytest.mark.parametrize("how", ["driver", "one executor"])
def test_the_runner_reads_the_samples_and_counts_the_ledger_as_computed_by_hand(
        tmp_path, how):
    model, judge, runner, ledger, (alpha, beta), got, got_again = _runs(tmp_path, how)
    expected = [
        {u: _expected_texts(model, alpha, ps) for u, ps in ITEMS.items()},
        {u: _expected_texts(judge, beta, ps) for u, ps in ITEMS.items()},
    ]
    assert got == expected and got_again == expected  # the unit without requests is read
    assert runner.incomplete == {}
    # ledger: under the stage's name, a request naming its own stage under that one
    for stage, m in ((alpha, model), (beta, judge)):
        for name, prompts in ((stage.name, ["one", "three"]),
                              (f"own stage ({stage.name})", ["two"])):
            texts = [_expected_texts(m, stage, [p])[0] for p in prompts]
            usage = ledger.usage(name, m.identity)
            # first run generated them, the second read them from the cache
            assert usage.generated_samples == usage.cached_samples == stage.n * len(prompts)
            assert usage.requests == 2 * len(prompts)
            words = sum(len(t.split()) for per in texts for t in per)
            assert usage.completion_tokens == words and usage.calls == len(prompts)
    assert model.samples + (judge.samples if judge is not model else 0) == 3 * 3 + 2 * 3
    # the counts of each stage's executor call (the second run's: all cached)
    assert runner.executed["alpha"].cached_samples == 9
    assert runner.executed["beta"].cached_samples == 6
    assert runner.executed["alpha"].generated_samples == 0


@pytest.mark.parametrize("how", ["driver", "one executor"])
def test_the_cache_rows_are_keyed_by_the_request_and_hold_the_samples(tmp_path, how):
    model, judge, _, _, (alpha, beta), _, _ = _runs(tmp_path, how)
    with GenerationStore(tmp_path / "c.sqlite") as store:
        rows = store._db.execute("SELECT key, COUNT(*) FROM samples GROUP BY key").fetchall()
        assert len(rows) == 6 and {n for _, n in rows} == {2, 3}
        for stage, m in ((alpha, model), (beta, judge)):
            for p in ("one", "two", "three"):
                key = request_key(m.identity, _request(f"{stage.name} {p}"), 0)
                texts = [g.text for g in store.get(key, range(stage.n))]
                assert texts == _expected_texts(m, stage, [p])[0]


def test_a_stage_that_asks_nothing_has_no_executor_call(tmp_path):
    asked: list[str] = []

    def executor(role: str) -> Executor:
        asked.append(role)
        raise AssertionError("no executor is built for a stage without requests")

    runner = StageRunner(executor)
    runner.executed["alpha"] = object()  # a previous run's counts
    (read,) = runner.run([_Prompts("alpha", MODEL, 2)], {"a": [], "b": []})
    assert read == {"a": [], "b": []} and asked == [] and "alpha" not in runner.executed


def _failing_runner(tmp_path, **options):
    model = _Failing(_respond("m"), name="m")
    store = GenerationStore(tmp_path / "c.sqlite")
    ex = Executor(model, store, show_progress=False)
    return model, store, ex, StageRunner.on(ex, **options)


FAILING = {"a": ["one"], "b": ["two", "bad"], "c": ["three"]}


def test_a_failed_request_marks_its_unit_incomplete_and_caches_nothing_of_it(tmp_path):
    model, store, _, runner = _failing_runner(tmp_path)
    stage = _Prompts("alpha", MODEL, 3)
    (read,) = runner.run([stage], FAILING)
    assert set(read) == {"a", "c"}  # the other units are read
    assert read["a"] == _expected_texts(model, stage, ["one"])
    assert runner.incomplete == {"b": "alpha samples missing (requests failed)"}
    bad = request_key(model.identity, _request("alpha bad"), 0)
    good = request_key(model.identity, _request("alpha two"), 0)
    assert store.cached_indices(bad) == set()  # nothing of the malformed reply
    assert store.cached_indices(good) == {0, 1, 2}  # its unit's other request is kept
    rows = store._db.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
    assert rows == 3 * 3
    assert runner.executed["alpha"].failed_requests == 1
    # a rerun on the same runner asks nothing of the incomplete unit
    calls = model.calls
    (again,) = runner.run([_Prompts("alpha", MODEL, 3)], FAILING)
    assert set(again) == {"a", "c"} and model.calls == calls
    assert runner.executed["alpha"].requested_samples == 6


def test_a_unit_already_incomplete_gets_no_request(tmp_path):
    model, _, ex, _ = _failing_runner(tmp_path)
    incomplete = {"a": "original samples missing (requests failed)"}
    runner = StageRunner.on(ex, incomplete)
    (read,) = runner.run([_Prompts("alpha", MODEL, 2)], {"a": ["one"], "c": ["three"]})
    assert set(read) == {"c"} and model.samples == 2
    assert runner.incomplete is incomplete and incomplete == {
        "a": "original samples missing (requests failed)"}


def test_a_strict_runner_raises_the_failure_after_the_rest_is_cached(tmp_path):
    _, store, _, runner = _failing_runner(tmp_path, strict=True)
    with pytest.raises(RequestsFailed) as failed:
        runner.run([_Prompts("alpha", MODEL, 2)], FAILING)
    assert [r is None for r in failed.value.results] == [False, False, True, False]
    assert runner.incomplete == {}
    assert store._db.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 3 * 2


def test_the_contexts_run_their_stages_on_the_judge_with_their_incomplete(tmp_path):
    """A grader's or kernel's context without the run's driver runs its stages on the
    judge's executor, built only when a stage asks something; failed units land in the
    context's own ``incomplete``."""
    task = Task("t", (Item("a", "Q?", "1"),), AnswerFormat.SHORT_TEXT, "")
    _, _, ex, _ = _failing_runner(tmp_path)
    built: list[int] = []

    def judge() -> Executor:
        built.append(1)
        return ex

    grading = GradingContext(task, judge=judge)
    assert grading.run_stage(_Prompts("alpha", MODEL, 1), {"a": []}) == {"a": []}
    assert built == [] and grading.executed == {"alpha": None}
    grading.run_stage(_Prompts("alpha", MODEL, 1), FAILING)
    assert built and grading.incomplete == {"b": "alpha samples missing (requests failed)"}
    assert grading.executed["alpha"].failed_requests == 1

    kernels = KernelContext(task, [])
    assert kernels.runner is not None
    assert kernels.runner.run([_Prompts("alpha", MODEL, 1)], {"a": []}) == [{"a": []}]
    with pytest.raises(ValueError, match="judge's executor"):
        kernels.runner.run([_Prompts("alpha", MODEL, 1)], {"a": ["one"]})
    with ModelPool(cache_path=tmp_path / "d.sqlite", show_progress=False) as pool:
        driver = StageDriver(pool)
        assert GradingContext(task, judge=judge, runner=driver).runner is driver


# ---------------------------------------------------------------- one home of the loop

HOMES = {SRC / "generation" / "stage.py", SRC / "pipeline" / "stages.py"}


def _loop_parts(tree: ast.AST) -> set[str]:
    """What of a stage's run ``tree`` does itself: ``execute`` (an executor's call, not a
    database's), ``plan`` and ``read`` (a stage's), ``results`` (the generations of a
    failed call, to mark units incomplete)."""
    parts = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = ast.unparse(node.func.value)
            if node.func.attr == "execute" and not target.endswith(("db", "conn")):
                parts.add("execute")
            elif node.func.attr in ("plan", "read"):
                parts.add(node.func.attr)
        elif isinstance(node, ast.ExceptHandler) and node.type is not None and (
                "RequestsFailed" in ast.unparse(node.type)) and any(
                isinstance(n, ast.Attribute) and n.attr == "results" for n in ast.walk(node)):
            parts.add("results")
    return parts


def _runs_a_stage(parts: set[str]) -> bool:
    return "execute" in parts and bool(parts & {"plan", "read", "results"})


def test_the_loop_detector_sees_a_stage_run_by_hand():
    by_hand = ast.parse(
        "def f(stage, executor, items):\n"
        "    plan = stage.plan(items, None)\n"
        "    gens = executor.execute([r for reqs in plan.values() for r in reqs])\n"
        "    return stage.read(gens)\n")
    assert _runs_a_stage(_loop_parts(by_hand))
    home = _loop_parts(ast.parse((SRC / "generation" / "stage.py").read_text("utf-8")))
    assert home == {"execute", "plan", "read", "results"}


def test_no_module_but_the_runner_plans_executes_and_reads_a_stage():
    found = sorted(
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
        if p not in HOMES and _runs_a_stage(_loop_parts(ast.parse(p.read_text("utf-8")))))
    assert found == [], f"a stage run outside the runner: {found}"


def test_there_is_one_way_to_run_a_stage():
    """No ``execute_stage`` left, and no module outside the runner catches a failed
    call's partial generations to mark units incomplete."""
    for p in SRC.rglob("*.py"):
        tree = ast.parse(p.read_text("utf-8"))
        names = {getattr(n, "id", None) or getattr(n, "attr", None) or getattr(n, "name", None)
                 for n in ast.walk(tree)}
        assert "execute_stage" not in names, p
        if p not in HOMES:
            assert "results" not in _loop_parts(tree), p
