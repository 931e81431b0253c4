"""The cache is a promise: a refactor changes no request key.

Every sample set of a run (original, perturbed, paraphrased, label, APriCoT, verbalized,
P(True), NLI), the perturbation and paraphrase writers, the judge kernel's pairs, the
SimpleQA and FActScore graders, the strength pipeline (CoT, writers, answer letters,
rubric judge, surprisal) and the perturbation checks (topic, threshold calibration) run
on scripted models; the keys they leave in the cache are compared with the keys the same
scenarios produced before the redesign of issue 11 (``data/request_keys.json``). A key
that changes means every user's cache misses: regenerate the pins only when a change of
keys is intended and announced (``CREDO_REGENERATE_KEY_PINS=1 pytest tests/test_request_keys.py``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from credo import RunConfig, run
from credo.config import BaselineConfig, JudgeConfig
from credo.generation.store import request_key
from credo.models.scripted import ScriptedModel
from credo.types import SamplingParams
from test_baselines import MC, logprobs_for, responder
from test_open_runs import bio_respond, code_respond, qa_respond
from test_strength import _letters, _respond, _word_logprobs

PINS = Path(__file__).parent / "data" / "request_keys.json"

V1 = {"prompt": "v1", "rules": "basic"}
"""The writer prompt and prefix rules before issue 16: pinned runs keep them, so a config
that names them reproduces every key written before (issue 16 changed the defaults on
purpose; ``baselines_mc_v2`` pins the new ones)."""
DATA = Path(__file__).parent / "data"


def _keys(cache: Path) -> dict[str, list[str]]:
    """Sorted request keys per model identity in a cache file."""
    with sqlite3.connect(cache) as db:
        rows = db.execute("SELECT identity, key FROM requests").fetchall()
    out: dict[str, list[str]] = {}
    for identity, key in rows:
        out.setdefault(identity, []).append(key)
    return {k: sorted(v) for k, v in sorted(out.items())}


def _baselines(tmp: Path, embedder, perturbation: dict | None = None) -> Path:
    cfg = RunConfig(
        task="toy", n=4, m=3, limit=None, bootstrap=0, out=tmp / "run", cache=tmp / "c.sqlite",
        perturbation=V1 if perturbation is None else perturbation,
        methods=["c3", "self_consistency", "verbalized", "p_true", "label_prob",
                 "answer_consistency", "paraphrase", "ccp"],
        baselines=BaselineConfig(paraphrases=3, apricot_samples=3),
    )
    run(cfg, model=ScriptedModel(responder, logprobs_fn=logprobs_for), embedder=embedder,
        task=MC, show_progress=False)
    return cfg.cache


def _expression_with_writer(tmp: Path, embedder, old_names: bool = False) -> Path:
    """``old_names``: the writer called by its names before issue 31 (``generator:`` in
    the config, ``perturber=`` in the API), deprecated but the same run."""
    from test_baselines import NUM

    cfg = RunConfig(
        task="toy_num", n=5, m=4, limit=None, bootstrap=0, prompt_style="expression",
        sampling=SamplingParams(min_p=0.05, max_tokens=48),
        perturbation={"generator" if old_names else "writer": "writer", "max_rounds": 2,
                      "sampling": {"max_tokens": 32}, **V1},
        methods=["c3", "c3_cross", "self_consistency", "answer_consistency"],
        baselines=BaselineConfig(logprobs=0), seed=3,
        out=tmp / "run", cache=tmp / "c.sqlite",
    )
    writer = {"perturber" if old_names else "writer": ScriptedModel(responder, name="writer")}
    run(cfg, model=ScriptedModel(responder), embedder=embedder, task=NUM, show_progress=False,
        **writer)
    return cfg.cache


def _code_judge(tmp: Path, embedder) -> Path:
    from credo.tasks.base import Task
    from credo.tasks.builtin import load_task

    he = load_task("humaneval")
    task = Task("humaneval", (he.items[2], he.items[0]), he.format, he.domain)
    cfg = RunConfig(task="humaneval", n=4, m=4, limit=None, bootstrap=0, kernel="embedding",
                    perturbation=V1,
                    methods=["c3", "c3@judge", "self_consistency@judge"],
                    out=tmp / "run", cache=tmp / "c.sqlite")
    run(cfg, model=ScriptedModel(code_respond), judge=ScriptedModel(code_respond, name="judge"),
        embedder=embedder, task=task, show_progress=False)
    return cfg.cache


def _simpleqa_grader(tmp: Path, embedder) -> Path:
    from credo.tasks.factual import load_simpleqa

    task = load_simpleqa(DATA / "simpleqa_layout3.csv")
    cfg = RunConfig(task="simpleqa", n=8, m=4, limit=None, kernel="judge", bootstrap=0,
                    perturbation=V1,
                    methods=["c3", "c3@embedding", "self_consistency"],
                    grader=JudgeConfig(max_tokens=4),
                    out=tmp / "run", cache=tmp / "c.sqlite")
    run(cfg, model=ScriptedModel(qa_respond), embedder=embedder, task=task, show_progress=False)
    return cfg.cache


def _factscore(tmp: Path, embedder) -> Path:
    from credo.tasks.longform import load_factscore_task

    names = tmp / "entities.txt"
    names.write_text("Ada Lovelace\n", encoding="utf-8")
    kb = tmp / "kb"
    kb.mkdir()
    (kb / "Ada Lovelace.txt").write_text("Ada Lovelace was born in 1815.", encoding="utf-8")
    cfg = RunConfig(task="factscore", n=4, m=3, limit=None, kernel="embedding", bootstrap=0,
                    perturbation=V1,
                    methods=["c3"], out=tmp / "run", cache=tmp / "c.sqlite")
    run(cfg, model=ScriptedModel(bio_respond), embedder=embedder,
        task=load_factscore_task(names, kb), show_progress=False)
    return cfg.cache


def _strength(tmp: Path, embedder) -> Path:
    from credo.api import run_strength
    from credo.config import StrengthConfig

    cfg = StrengthConfig(task="mmlu:high_school_statistics", limit=3,
                         models=["scripted-a"], writer="scripted-w", judge="scripted-j",
                         out=tmp / "strength", cache=tmp / "c.sqlite")
    models = {s: ScriptedModel(_respond, name=s, logprobs_fn=_letters)
              for s in ("scripted-a", "scripted-w", "scripted-j")}
    scorer = ScriptedModel(lambda m, s: m[-1].content, name="scorer", logprobs_fn=_word_logprobs)
    run_strength(cfg, models=models, embedder=embedder, scorer=scorer, show_progress=False,
                 write=False)
    return cfg.cache


def _perturbation_checks(tmp: Path, embedder) -> Path:
    from credo.generation.executor import Executor
    from credo.generation.store import GenerationStore
    from credo.perturb.quality import calibrate_threshold, topic_alignment

    texts = ["Farmers at the market often compare their harvests.",
             "Libraries lend books to readers of every age."]
    with GenerationStore(tmp / "c.sqlite") as store:
        judge = ScriptedModel(lambda m, s: "Math", name="topic-judge")
        topic_alignment(texts, "Math", Executor(judge, store, 0, show_progress=False),
                        sampling=SamplingParams(temperature=0.0, max_tokens=8))
        para = ScriptedModel(lambda m, s: f"Variant {s % 7}: {m[-1].content[-40:]}",
                             name="paraphraser")
        calibrate_threshold(texts, Executor(para, store, 0, show_progress=False), embedder,
                            n_paraphrases=4,
                            sampling=SamplingParams(temperature=1.0, max_tokens=64))
    return tmp / "c.sqlite"


SCENARIOS = {
    "baselines_mc": _baselines,
    "baselines_mc_v2": lambda tmp, emb: _baselines(tmp, emb, perturbation={}),
    "expression_with_writer": _expression_with_writer,
    "code_judge_kernel": _code_judge,
    "simpleqa_grader": _simpleqa_grader,
    "factscore_knowledge": _factscore,
    "strength": _strength,
    "perturbation_checks": _perturbation_checks,
}


def _pins() -> dict:
    return json.loads(PINS.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_request_keys_are_pinned(name, tmp_path, bow_embedder):
    got = _keys(SCENARIOS[name](tmp_path, bow_embedder))
    if os.environ.get("CREDO_REGENERATE_KEY_PINS") == "1":
        pins = _pins() if PINS.is_file() else {}
        pins[name] = got
        PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    want = _pins()[name]
    assert sorted(got) == sorted(want), "model identities differ"
    for identity in want:
        missing = sorted(set(want[identity]) - set(got[identity]))
        extra = sorted(set(got[identity]) - set(want[identity]))
        assert not missing and not extra, (
            f"{name} / {identity}: {len(missing)} pinned keys gone, {len(extra)} new keys"
        )


def test_the_writers_old_names_leave_the_pinned_keys(tmp_path, bow_embedder):
    """A config and a call that name the writer as before issue 31 (``generator``,
    ``perturber=``) load with a DeprecationWarning and ask exactly the pinned requests."""
    with pytest.warns(DeprecationWarning):
        got = _keys(_expression_with_writer(tmp_path, bow_embedder, old_names=True))
    assert got == {k: sorted(v) for k, v in _pins()["expression_with_writer"].items()}


SERVED = "http://127.0.0.1:9/v1"
"""A served model's URL: nothing listens there, and nothing is asked of it."""


@pytest.mark.parametrize("given", [
    {"model": "openai:toy", "model_options": {"base_url": SERVED, "label": "v7",
                                              "max_retries": 0}},
    {"model": {"model": "openai:toy", "base_url": SERVED, "label": "v7",
               "model_options": {"max_retries": 0}}},
], ids=["model_options", "role_mapping"])
def test_a_served_model_under_test_keeps_its_keys_in_either_config_shape(tmp_path, given):
    """The model under test is a role like the others (issue 31): a config naming it the
    old way (``model`` and an untyped ``model_options``) and one giving it the role
    mapping every other role takes load to the same fields, build the same identity and
    ask requests under the pinned key."""
    from credo.generation.pool import MODEL, ModelPool
    from credo.pipeline.runner import assign_roles
    from credo.types import GenerationRequest, Message

    cfg = RunConfig.model_validate({**given, "cache": tmp_path / "c.sqlite"})
    assert cfg.model == "openai:toy"
    assert cfg.model_options == {"base_url": SERVED, "label": "v7", "max_retries": 0}
    role = cfg.model_role
    assert (role.model, role.base_url, role.label) == ("openai:toy", SERVED, "v7")
    assert role.model_options == {"max_retries": 0}
    with ModelPool(cache_path=cfg.cache_path, seed=cfg.seed, show_progress=False,
                   reach=False) as pool:
        assign_roles(pool, cfg)
        identity = pool.model(MODEL, probe=False).identity
    assert identity == "openai:toy@v7"
    req = GenerationRequest(messages=(Message(role="user", content="2 + 2?"),))
    key = request_key(identity, req, cfg.seed)
    if os.environ.get("CREDO_REGENERATE_KEY_PINS") == "1":
        pins = _pins()
        pins["_served_model_under_test"] = key
        PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert key == _pins()["_served_model_under_test"]


def test_request_key_of_a_hand_built_request_is_pinned():
    """One key by value: identity, messages, every sampling field at its default, run seed."""
    from credo.types import GenerationRequest, Message

    req = GenerationRequest(messages=(Message(role="user", content="2 + 2?"),))
    assert request_key("llamacpp:x@sha256:0", req, 0) == _pins()["_hand_built"]
    # seed and n select samples; they are not part of the key
    assert request_key("llamacpp:x@sha256:0", req.model_copy(update={"seed": 9, "n": 4}), 0) == (
        _pins()["_hand_built"]
    )
