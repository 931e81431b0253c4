"""The cache and the executor: one row per sample, seeds from the key, resume without loss."""

from collections.abc import Iterator, Sequence

import pytest

from credo.generation.executor import Executor, PlannedRequest, _blocks
from credo.generation.store import GenerationStore, request_key, sample_seed
from credo.models.scripted import ScriptedModel
from credo.types import Generation, GenerationRequest, Message, SamplingParams


def echo_seed(messages, seed):
    return f"{messages[-1].content}#{seed}"


def req(text: str, **params) -> GenerationRequest:
    return GenerationRequest(
        messages=(Message(role="user", content=text),), params=SamplingParams(**params)
    )


class Interrupting:
    """Wraps a model and raises after ``after`` completed requests, like a Ctrl-C."""

    def __init__(self, inner, after: int) -> None:
        self.inner, self.after = inner, after

    @property
    def identity(self):
        return self.inner.identity

    @property
    def capabilities(self):
        return self.inner.capabilities

    def generate(
        self, requests: Sequence[GenerationRequest]
    ) -> Iterator[tuple[int, list[Generation]]]:
        for done, out in enumerate(self.inner.generate(requests)):
            if done == self.after:
                raise KeyboardInterrupt
            yield out

    def close(self) -> None:
        pass


def test_key_covers_what_changes_output_but_not_seed_or_n():
    a = req("q")
    assert request_key("m", a, 0) == request_key("m", a.model_copy(update={"seed": 9, "n": 4}), 0)
    assert request_key("m", a, 0) != request_key("m2", a, 0)
    assert request_key("m", a, 0) != request_key("m", a, 1)
    assert request_key("m", a, 0) != request_key("m", req("q", temperature=0.5), 0)
    assert request_key("m", a, 0) != request_key("m", req("q2"), 0)


def test_sample_seed_is_base_plus_index():
    k = request_key("m", req("q"), 0)
    assert sample_seed(k, 5) == sample_seed(k, 0) + 5
    assert 0 <= sample_seed(k, 0) < 2**31 - 2**20


def test_blocks_split_consecutive_runs():
    assert _blocks([0, 1, 2, 5, 6, 9], 16) == [(0, 3), (5, 2), (9, 1)]
    assert _blocks(list(range(10)), 4) == [(0, 4), (4, 4), (8, 2)]
    assert _blocks([], 4) == []


def test_raising_n_generates_only_the_new_samples(tmp_path):
    model = ScriptedModel(echo_seed)
    with GenerationStore(tmp_path / "c.sqlite") as store:
        ex = Executor(model, store, run_seed=0, max_block=4, show_progress=False)
        first = ex.execute([PlannedRequest(req("q"), 10)])[0]
        assert model.samples == 10
        second = ex.execute([PlannedRequest(req("q"), 20)])[0]
        assert model.samples == 20
        assert ex.history[-1].generated_samples == 10
        assert ex.history[-1].cached_samples == 10
        assert [g.text for g in second[:10]] == [g.text for g in first]
        # sample i was drawn with seed base + i
        k = ex.key(req("q"))
        assert [g.text for g in second] == [f"q#{sample_seed(k, i)}" for i in range(20)]
        assert store.count_samples() == 20


def test_interrupted_run_resumes_equal_to_uninterrupted(tmp_path):
    planned = [PlannedRequest(req(f"q{i}"), 7) for i in range(6)]
    with GenerationStore(tmp_path / "full.sqlite") as store:
        full = Executor(ScriptedModel(echo_seed), store, 3, max_block=3, show_progress=False)
        reference = [[g.text for g in gens] for gens in full.execute(planned)]

    inner = ScriptedModel(echo_seed)
    with GenerationStore(tmp_path / "resume.sqlite") as store:
        ex = Executor(Interrupting(inner, after=5), store, 3, max_block=3, show_progress=False)
        with pytest.raises(KeyboardInterrupt):
            ex.execute(planned)
        partial = store.count_samples()
        assert 0 < partial < 42

    counting = ScriptedModel(echo_seed)
    with GenerationStore(tmp_path / "resume.sqlite") as store:
        ex = Executor(counting, store, 3, max_block=3, show_progress=False)
        resumed = [[g.text for g in gens] for gens in ex.execute(planned)]
        assert resumed == reference
        assert counting.samples == 42 - partial  # nothing redone
        assert store.count_samples() == 42  # nothing duplicated


def test_identical_requests_are_generated_once(tmp_path):
    model = ScriptedModel(echo_seed)
    with GenerationStore(tmp_path / "c.sqlite") as store:
        ex = Executor(model, store, 0, show_progress=False)
        a, b = ex.execute([PlannedRequest(req("q"), 3), PlannedRequest(req("q"), 5)])
        assert model.samples == 5
        assert [g.text for g in a] == [g.text for g in b[:3]]


def test_store_round_trips_logprobs(tmp_path):
    from credo.types import TokenLogprob

    g = Generation("x", "stop", 1, 2, (TokenLogprob("x", -0.1, (("x", -0.1), ("y", -2.3))),), 0.5)
    with GenerationStore(tmp_path / "c.sqlite") as store:
        r = req("q")
        k = request_key("m", r, 0)
        assert store.put(k, "m", r, 0, [g]) == 1
        assert store.put(k, "m", r, 0, [g]) == 0  # the same sample is never written twice
        assert store.get(k, [0]) == [g]
        with pytest.raises(KeyError, match="sample 1"):
            store.get(k, [1])
