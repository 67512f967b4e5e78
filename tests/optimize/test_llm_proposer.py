"""The LLM proposer against a scripted OpenAI-compatible server (tests/helpers/fake_llm.py), real openai client.

The context is samples/vector_add.cu with its spec, the real findings of ``check_text`` (so the prompt
carries real rule guidance) and a profile summary in the format kernellsp.profile.ncu produces.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.common import SAMPLES_DIR, requires_nvcc
from helpers.fake_llm import FLOAT4, GRID_STRIDE, FakeLlm, answer, candidate

from kernellsp.check import CheckOptions, check_text
from kernellsp.findings import Finding
from kernellsp.optimize.propose.base import ProposalContext, ProposerError
from kernellsp.optimize.propose.llm import LlmProposer, is_loopback
from kernellsp.optimize.propose.llm_answer import AnswerError, extract_json
from kernellsp.optimize.propose.prompt import SYSTEM_PROMPT, build_messages
from kernellsp.optimize.verify.scope import check_scope
from kernellsp.profile.findings import KernelSummary
from kernellsp.rules.engine import RuleSet, load_rules
from kernellsp.settings import LlmSettings
from kernellsp.source import spec as specmod
from kernellsp.source.model import parse_source

VECTOR_ADD = SAMPLES_DIR / "vector_add.cu"
NO_KEY_VAR = "KERNELLSP_TEST_LLM_KEY_THAT_IS_NOT_SET"


@pytest.fixture(scope="module")
def ruleset() -> RuleSet:
    return load_rules()


@pytest.fixture(scope="module")
def findings(ruleset: RuleSet) -> list[Finding]:
    text = VECTOR_ADD.read_text()
    report = check_text(VECTOR_ADD, text, CheckOptions(use_cache=False), ruleset)
    assert report.error is None
    return report.findings


def _profile() -> dict[str, Any]:
    """A profile summary in the shape kernellsp.profile.findings.KernelSummary has (values of an H100 run)."""
    return KernelSummary(
        name="vector_add",
        entry="vector_add",
        duration_ns=245_310.0,
        dram_pct=88.4,
        fp32_pct=1.2,
        sm_pct=21.0,
        bottleneck="memory-bound (DRAM)",
        hot_lines=[
            {
                "file": "vector_add.cu",
                "line": 19,
                "share": 0.83,
                "stall": "long_scoreboard",
                "stall_share": 0.91,
            }
        ],
        metrics={
            "dominant_stall": "long_scoreboard",
            "dominant_stall_share": 0.7,
            "achieved_occupancy_pct": 81.0,
        },
        ncu_rules=[
            {
                "id": "SOLBottleneck",
                "type": "OPT",
                "title": "DRAM throughput is close to its peak",
                "speedup_pct": None,
            },
            {
                "id": "MemoryL2Compression",
                "type": "OPT",
                "title": "Vectorize global memory accesses",
                "speedup_pct": 12.5,
            },
        ],
    ).__dict__


@pytest.fixture
def ctx(findings: list[Finding]) -> ProposalContext:
    text = VECTOR_ADD.read_text()
    model = parse_source(text, str(VECTOR_ADD))
    bound = next(b for b in specmod.specs_from_source(model)[0] if b.entry == "vector_add")
    return ProposalContext(
        path=str(VECTOR_ADD),
        text=text,
        original_text=text,
        entry="vector_add",
        model=model,
        spec=bound,
        findings=list(findings),
        profile=_profile(),
        tried=[
            {
                "key": "0123456789abcdef",
                "description": "BLOCK = 512 (tunable order)",
                "proposer": "tuner",
                "verdict": "not_faster",
                "speedup": 1.004,
            }
        ],
    )


@pytest.fixture
def fake() -> Iterator[FakeLlm]:
    with FakeLlm(slow_s=5.0) as server:
        yield server


def _proposer(fake: FakeLlm, ruleset: RuleSet, **kw: Any) -> LlmProposer:
    settings = LlmSettings(base_url=fake.base_url, model="fake-cuda-expert", api_key_env=NO_KEY_VAR, **kw)
    return LlmProposer(settings, ruleset)


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NO_KEY_VAR, raising=False)


def _header(req: dict[str, Any], name: str) -> str | None:
    return next((v for k, v in req["headers"].items() if k.lower() == name.lower()), None)


# --------------------------------------------------------------------------------------------------
# Good answers


def test_good_answer_gives_in_scope_candidates(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    fake.script("good")
    prop = _proposer(fake, ruleset)
    cands = prop.propose(ctx, 4)
    assert [c.description for c in cands] == [
        "const __restrict__ inputs and a grid-stride loop",
        "float4 loads and stores with a scalar tail",
    ]
    for c in cands:
        assert c.proposer == "llm" and prop.name == "llm"
        assert c.rules == ["KL405"]
        assert check_scope(ctx.text, c.text, [ctx.entry]).ok
        assert c.key and c.key not in ctx.tried_keys()
    assert GRID_STRIDE in cands[0].text
    assert "ceil_div(N, BLOCK)" in cands[0].text  # launch unchanged
    assert FLOAT4.split("\n\n")[1] in cands[1].text and "float4 add4(" in cands[1].text
    assert 'grid = "ceil_div(ceil_div(N, 4), BLOCK)"' in cands[1].text  # the structured launch field
    assert cands[1].predicted_gain_pct == 12.0
    # Host-side and the rest of the spec untouched.
    new_bound = specmod.specs_from_source(parse_source(cands[1].text))[0][0]
    assert new_bound.spec.args == ctx.spec.spec.args and new_bound.spec.shapes == ctx.spec.spec.shapes
    # One call, recorded; the request is a proper chat completion for the configured model.
    assert len(fake.chat_requests) == 1
    body = fake.chat_requests[0]
    assert body["model"] == "fake-cuda-expert"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert _header(fake.requests[0], "Authorization") == "Bearer unused"  # loopback: placeholder key
    assert len(prop.calls) == 1
    call = prop.calls[0]
    assert call["attempt"] == 1 and call["outcome"] == "ok" and call["candidates"] == 2
    assert call["prompt_tokens"] > 0 and call["completion_tokens"] > 0 and call["latency_s"] >= 0
    assert prop.tokens_used == call["total_tokens"] == call["prompt_tokens"] + call["completion_tokens"]


def test_fenced_answer_with_prose_is_accepted(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    fake.script("good_fenced")
    cands = _proposer(fake, ruleset).propose(ctx, 4)
    assert len(cands) == 2 and GRID_STRIDE in cands[0].text


def test_k_limits_the_candidates(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    fake.script("good")
    cands = _proposer(fake, ruleset).propose(ctx, 1)
    assert len(cands) == 1 and GRID_STRIDE in cands[0].text
    assert "Propose up to 1 candidate," in fake.chat_requests[0]["messages"][1]["content"]


def test_wrong_answer_is_still_a_candidate(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    """The proposer does not judge correctness: the verification gate does."""
    fake.script("wrong")
    cands = _proposer(fake, ruleset).propose(ctx, 4)
    assert len(cands) == 1
    assert "c[i] = a[i] - b[i];" in cands[0].text
    assert check_scope(ctx.text, cands[0].text, ["vector_add"]).ok


@requires_nvcc
def test_fake_rewrites_compile(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    fake.script("good", "wrong")
    prop = _proposer(fake, ruleset)
    cands = prop.propose(ctx, 4) + prop.propose(ctx, 4)
    assert len(cands) == 3
    for c in cands:
        report = check_text(VECTOR_ADD, c.text, CheckOptions(use_cache=False), ruleset)
        assert report.error is None
        assert not [f for f in report.findings if f.code in ("KL001", "KL003")], c.description
        # The rewrites use const __restrict__: the rule that asked for it no longer fires.
        if "__restrict__" in c.text:
            assert "KL405" not in {f.code for f in report.findings}


# --------------------------------------------------------------------------------------------------
# The prompt


def test_prompt_carries_kernel_spec_rules_profile_and_memory(
    fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext, findings: list[Finding]
) -> None:
    fake.script("good")
    _proposer(fake, ruleset).propose(ctx, 3)
    system, user = (m["content"] for m in fake.chat_requests[0]["messages"])
    assert system == SYSTEM_PROMPT
    for phrase in (
        "expert CUDA performance engineer",
        "H100",
        "sm_90",
        '"candidates"',
        "predicted_gain_pct",
        "__restrict__",
        "__launch_bounds__",
        '"launch" field',
        "#include",
        "#define",
        "file scope",
        "streams, CUDA graphs",
        "tolerance",
        "re-association",
    ):
        assert phrase in system, phrase
    # The kernel source, verbatim.
    kernel_src = ctx.text[ctx.text.index("__global__ void vector_add") :].rstrip()
    assert kernel_src in user
    assert "#include <cuda_runtime.h>" in user  # read-only context
    # The spec as TOML.
    assert specmod.spec_to_toml(ctx.spec.spec).strip() in user
    # Fired rules (real findings of check_text) with their guidance text from rules/.
    fired = {f.code for f in findings if f.kernel == "vector_add"}
    assert "KL405" in fired
    for code in fired:
        rule = ruleset.get(code)
        assert rule is not None
        assert code in user
        assert rule.guidance.strip() in user
    assert "line 15" in user  # the finding's line
    # Bottleneck summary: duration, roofline shares, bottleneck, hot line with its stall, ncu's recommendations.
    assert "245.3 us" in user and "DRAM 88.4% of peak" in user and "FP32 1.2% of peak" in user
    assert "memory-bound (DRAM)" in user
    assert "line 19 (83%, long_scoreboard 91%): `c[i] = a[i] + b[i];`" in user
    assert "Vectorize global memory accesses (est. 12%)" in user
    assert "DRAM throughput is close to its peak" in user
    # Memory: what was tried and how it fared, and the instruction not to repeat it.
    assert "BLOCK = 512 (tunable order) [tuner] -> not_faster (measured 1.004x)" in user
    assert "Do not propose a rejected idea again" in user
    assert "Propose up to 3 candidates" in user


def test_prompt_is_deterministic(ruleset: RuleSet, ctx: ProposalContext) -> None:
    a = build_messages(ctx, ruleset, 4)
    b = build_messages(ctx, ruleset, 4)
    assert a == b
    assert len(a[1]["content"]) < 12_000  # compact


def test_prompt_without_profile_or_history(ruleset: RuleSet, ctx: ProposalContext) -> None:
    ctx.profile = None
    ctx.tried = []
    user = build_messages(ctx, ruleset, 2)[1]["content"]
    assert "No profile is available" in user
    assert "## Already tried\nNothing yet." in user
    assert "KL405" in user


# --------------------------------------------------------------------------------------------------
# Unusable answers are retried with the parse error


def test_malformed_answer_is_retried_with_the_error(
    fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext
) -> None:
    fake.script("malformed", "good")
    prop = _proposer(fake, ruleset)
    cands = prop.propose(ctx, 4)
    assert len(cands) == 2
    assert len(fake.chat_requests) == 2
    first, second = fake.chat_requests
    msgs = second["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[:2] == first["messages"]
    assert msgs[2]["content"].startswith("I would use float4 loads here")  # the previous answer, verbatim
    error = prop.calls[0]["parse_error"]
    assert "not a JSON object" in error
    assert error in msgs[3]["content"]  # the exact parse error, quoted
    assert [c["attempt"] for c in prop.calls] == [1, 2]
    assert [c["outcome"] for c in prop.calls] == ["parse_error", "ok"]
    assert prop.tokens_used == sum(c["total_tokens"] for c in prop.calls)


@pytest.mark.parametrize(
    ("behaviour", "phrase"),
    [
        ("malformed", "not a JSON object"),
        ("missing_field", "candidate 1: missing field(s) 'code'"),
        ("no_kernel", "does not define global function vector_add"),
    ],
)
def test_three_unusable_answers_raise(
    fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext, behaviour: str, phrase: str
) -> None:
    fake.script(behaviour, behaviour, behaviour, "good")
    prop = _proposer(fake, ruleset)
    with pytest.raises(ProposerError, match="no usable answer in 3 attempts") as info:
        prop.propose(ctx, 4)
    assert phrase in str(info.value)
    assert len(fake.chat_requests) == 3  # one call plus two retries, no more
    assert phrase in fake.chat_requests[2]["messages"][-1]["content"]
    assert len(fake.chat_requests[2]["messages"]) == 6


@pytest.mark.parametrize(
    ("behaviour", "phrase"),
    [("scope", "'#include <cuda_fp16.h>'"), ("scope_signature", "changed the signature of vector_add")],
)
def test_scope_violation_is_a_parse_error(
    fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext, behaviour: str, phrase: str
) -> None:
    fake.script(behaviour, "good")
    prop = _proposer(fake, ruleset)
    cands = prop.propose(ctx, 4)
    assert len(cands) == 2
    assert phrase in prop.calls[0]["parse_error"]
    assert phrase in fake.chat_requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("launch", "phrase"),
    [
        ({"grid": "ceil_div(N, 2048)", "block": 2048}, "exceeds the 1024-thread limit"),
        ({"grid": "ceil_div(N, 256)", "block": 256, "stream": 1}, "unknown field(s) 'stream'"),
        ({"grid": True, "block": 256}, "'launch.grid' must be an integer"),
        ({"grid": "ceil_div(M, 256)", "block": 256}, "unknown name 'M'"),
        ({"grid": "N / 0", "block": 256}, "division by zero"),
        ({"block": 256}, "'launch' needs 'grid'"),
    ],
)
def test_bad_launch_is_a_parse_error(
    fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext, launch: dict[str, Any], phrase: str
) -> None:
    fake.script({"content": answer(candidate(GRID_STRIDE, "bigger blocks", launch=launch))}, "good")
    prop = _proposer(fake, ruleset)
    assert len(prop.propose(ctx, 4)) == 2
    err = prop.calls[0]["parse_error"]
    assert "launch" in err and phrase in err


def test_strict_schema(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    extra = candidate(GRID_STRIDE, "grid-stride")
    extra["confidence"] = 0.9
    bad_gain = candidate(GRID_STRIDE, "grid-stride", gain="a lot")  # type: ignore[arg-type]
    fake.script(
        {"content": answer(extra)},
        {"content": answer(bad_gain)},
        {"content": '{"candidates": [], "notes": "none"}'},
    )
    prop = _proposer(fake, ruleset)
    with pytest.raises(ProposerError):
        prop.propose(ctx, 4)
    errors = [c["parse_error"] for c in prop.calls]
    assert "unknown field(s) 'confidence'" in errors[0]
    assert "'predicted_gain_pct' must be a finite number" in errors[1]
    assert "unknown top-level field(s) 'notes'" in errors[2]


def test_extract_json() -> None:
    assert extract_json('{"candidates": []}') == {"candidates": []}
    assert extract_json('Sure.\n```json\n{"candidates": []}\n```') == {"candidates": []}
    for bad, phrase in (
        ("", "empty"),
        ("Here you go: {}", "not a JSON object"),
        ("```json\n{}\n```\n```json\n{}\n```", "2 fenced blocks"),
        ("```cuda\n{}\n```", "marked 'cuda'"),
        ('{"candidates": [}', "not valid JSON"),
        ('{"candidates": []} and more', "not valid JSON: Extra data"),
    ):
        with pytest.raises(AnswerError, match=phrase):
            extract_json(bad)


# --------------------------------------------------------------------------------------------------
# Endpoint failures


def test_slow_server_times_out(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    fake.script("slow")
    prop = _proposer(fake, ruleset, timeout_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(ProposerError, match="timeout") as info:
        prop.propose(ctx, 4)
    elapsed = time.monotonic() - t0
    assert 0.9 <= elapsed < 3.0
    assert fake.base_url in str(info.value) and "llm.timeout_s" in str(info.value)
    assert len(fake.chat_requests) == 1  # max_retries=0: no silent second attempt
    assert prop.calls[0]["outcome"] == "error"


def test_http_500_names_the_endpoint(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    fake.script("error")
    prop = _proposer(fake, ruleset)
    with pytest.raises(ProposerError) as info:
        prop.propose(ctx, 4)
    msg = str(info.value)
    assert fake.base_url in msg and "HTTP 500" in msg and "fake-cuda-expert" in msg
    assert "The server had an error" in msg
    assert "\n" not in msg
    assert len(fake.chat_requests) == 1


def test_unreachable_port(ruleset: RuleSet, ctx: ProposalContext) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    prop = LlmProposer(LlmSettings(base_url=url, model="m", api_key_env=NO_KEY_VAR, timeout_s=5), ruleset)
    with pytest.raises(ProposerError) as info:
        prop.propose(ctx, 4)
    assert str(info.value) == (
        f"cannot reach the LLM at {url}: connection refused; check llm.base_url or unset "
        "it to use the built-in tuner"
    )


# --------------------------------------------------------------------------------------------------
# Budget, memory, keys


def test_token_budget_stops_further_calls(ruleset: RuleSet, ctx: ProposalContext) -> None:
    with FakeLlm(big_usage=50_000) as fake:
        fake.script("usage", "good")
        prop = _proposer(fake, ruleset, max_tokens_per_run=20_000)
        assert len(prop.propose(ctx, 4)) == 2  # the call that overspends still counts
        assert prop.tokens_used == 50_000 and prop.tokens_left == 0
        with pytest.raises(ProposerError, match=r"LLM token budget of 20000 tokens is spent \(50000 used"):
            prop.propose(ctx, 4)
        assert len(fake.chat_requests) == 1


def test_token_budget_stops_retries(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    fake.script({"content": "no JSON here", "usage": (9_000, 2_000)}, "good")
    prop = _proposer(fake, ruleset, max_tokens_per_run=10_000)
    with pytest.raises(ProposerError, match="LLM token budget of 10000 tokens is spent"):
        prop.propose(ctx, 4)
    assert len(fake.chat_requests) == 1 and prop.tokens_used == 11_000


def test_tried_keys_are_not_proposed_again(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    fake.script("good", "good")
    prop = _proposer(fake, ruleset)
    first = prop.propose(ctx, 4)
    ctx.tried.append(
        {
            "key": first[0].key,
            "description": first[0].description,
            "proposer": "llm",
            "verdict": "not_faster",
            "speedup": 1.01,
        }
    )
    second = prop.propose(ctx, 4)
    assert [c.key for c in second] == [first[1].key]
    assert prop.dropped == [
        {"key": first[0].key, "description": first[0].description, "reason": "already tried", "round": 0}
    ]
    user = fake.chat_requests[1]["messages"][1]["content"]
    assert "const __restrict__ inputs and a grid-stride loop [llm] -> not_faster (measured 1.010x)" in user


def test_unchanged_and_duplicate_candidates_are_dropped(
    fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext
) -> None:
    original = ctx.text[ctx.text.index("__global__ void vector_add") :]
    fake.script(
        {
            "content": answer(
                candidate(original, "no change"), candidate(GRID_STRIDE, "a"), candidate(GRID_STRIDE, "b")
            )
        }
    )
    prop = _proposer(fake, ruleset)
    cands = prop.propose(ctx, 4)
    assert [c.description for c in cands] == ["a"]
    assert [d["reason"] for d in prop.dropped] == ["no change", "duplicate"]


def test_missing_key_for_remote_endpoint(ruleset: RuleSet) -> None:
    settings = LlmSettings(base_url="https://llm.example.com/v1", model="m", api_key_env=NO_KEY_VAR)
    with pytest.raises(ProposerError, match=NO_KEY_VAR):
        LlmProposer(settings, ruleset)


def test_unconfigured_settings(ruleset: RuleSet) -> None:
    with pytest.raises(ProposerError, match=r"llm\.base_url and llm\.model"):
        LlmProposer(LlmSettings(), ruleset)


def test_key_is_sent_but_never_reported(
    fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-0123456789-secret"
    monkeypatch.setenv(NO_KEY_VAR, secret)
    fake.script("malformed", "echo_key")  # the server's error message quotes the key back
    prop = _proposer(fake, ruleset)
    with pytest.raises(ProposerError) as info:
        prop.propose(ctx, 4)
    assert _header(fake.requests[0], "Authorization") == f"Bearer {secret}"
    assert "invalid credentials: Bearer ***" in str(info.value)
    assert secret not in str(info.value)
    assert secret not in repr(prop.calls) and secret not in repr(prop.dropped)
    assert all(secret not in str(m) for body in fake.chat_requests for m in body["messages"])


def test_is_loopback() -> None:
    assert is_loopback("http://127.0.0.1:8000/v1") and is_loopback("http://localhost/v1")
    assert is_loopback("http://[::1]:8000/v1") and is_loopback("http://127.1.2.3/v1")
    assert not is_loopback("https://api.openai.com/v1") and not is_loopback("http://10.0.0.5/v1")
    assert not is_loopback("not a url")


def test_workspace_spec_keeps_its_launch(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    ctx.spec = specmod.BoundSpec(
        spec=ctx.spec.spec, entry="vector_add", origin="workspace", origin_path="kernellsp.toml"
    )
    fake.script(
        {"content": answer(candidate(FLOAT4, "float4", launch={"grid": "ceil_div(N, 1024)", "block": 256}))},
        "wrong",
    )
    prop = _proposer(fake, ruleset)
    assert len(prop.propose(ctx, 4)) == 1
    assert (
        "'launch' must be null: the spec of vector_add lives in kernellsp.toml"
        in prop.calls[0]["parse_error"]
    )
    assert 'keep "launch": null' in fake.chat_requests[0]["messages"][1]["content"]


def test_unknown_entry_makes_no_call(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    ctx.entry = "no_such_kernel"
    with pytest.raises(ProposerError, match="no_such_kernel is not defined"):
        _proposer(fake, ruleset).propose(ctx, 4)
    assert fake.requests == []


def test_missing_usage_is_estimated(fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext) -> None:
    fake.script({"content": answer(candidate(GRID_STRIDE, "grid-stride")), "omit_usage": True})
    prop = _proposer(fake, ruleset)
    assert len(prop.propose(ctx, 4)) == 1
    assert prop.calls[0]["usage_estimated"] is True
    assert prop.tokens_used == prop.calls[0]["total_tokens"] > 500


def test_fake_server_speaks_openai(fake: FakeLlm) -> None:
    import openai

    client = openai.OpenAI(base_url=fake.base_url, api_key="unused", max_retries=0, timeout=5)
    assert [m.id for m in client.models.list()] == ["fake-cuda-expert"]
    fake.script("good")
    resp = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert resp.object == "chat.completion" and resp.choices[0].message.role == "assistant"
    assert resp.choices[0].finish_reason == "stop" and resp.usage is not None
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    assert fake.chat_requests[-1]["messages"] == [{"role": "user", "content": "hi"}]


def test_later_rounds_quote_the_profiled_original(ruleset: RuleSet, ctx: ProposalContext) -> None:
    """The loop checks and profiles the original once: its line numbers refer to the original text."""
    from kernellsp.optimize.propose.base import splice_kernel

    champion = splice_kernel(ctx.text, "vector_add", GRID_STRIDE)
    model = parse_source(champion, ctx.path)
    ctx.text, ctx.model, ctx.round = champion, model, 2
    ctx.spec = next(b for b in specmod.specs_from_source(model)[0] if b.entry == "vector_add")
    user = build_messages(ctx, ruleset, 2)[1]["content"]
    assert GRID_STRIDE in user  # the champion is what gets rewritten
    assert "line 19 (83%, long_scoreboard 91%): `c[i] = a[i] + b[i];`" in user
    assert "line 15: `__global__ void vector_add(const float* a, const float* b, float* c, int n)`" in user
    assert "refer to it" in user and "round 2" in user


# --------------------------------------------------------------------------------------------------
# Answers the client cannot use: a ProposerError naming the endpoint, never a raw exception


@pytest.mark.parametrize("behaviour", ["no_choices", "broken_body"])
def test_unusable_completion_is_a_proposer_error(
    fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext, behaviour: str
) -> None:
    fake.script(behaviour)
    prop = _proposer(fake, ruleset)
    with pytest.raises(ProposerError) as info:
        prop.propose(ctx, 4)
    assert fake.base_url in str(info.value)
    assert len(fake.chat_requests) == 1, "a protocol error is not retried like a bad answer"


def test_absurd_numbers_in_the_answer_are_parse_errors(
    fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext
) -> None:
    huge = "9" * 5000  # more digits than Python's int parser accepts by default
    fake.script(
        {
            "content": answer(candidate(GRID_STRIDE, "grid-stride")).replace(
                '"code"', f'"n": {huge}, "code"', 1
            )
        },
        {"content": answer({**candidate(GRID_STRIDE, "grid-stride"), "predicted_gain_pct": 10**400})},
        "good",
    )
    prop = _proposer(fake, ruleset)
    assert prop.propose(ctx, 4)
    errors = [c.get("parse_error", "") for c in prop.calls[:2]]
    assert errors[0].startswith("not valid JSON: ") and errors[1]


def test_negative_usage_cannot_refill_the_budget(
    fake: FakeLlm, ruleset: RuleSet, ctx: ProposalContext
) -> None:
    fake.script({"content": answer(candidate(GRID_STRIDE, "grid-stride")), "usage": (-1_000_000, 0)})
    prop = _proposer(fake, ruleset)
    prop.propose(ctx, 4)
    assert prop.tokens_used > 0 and prop.calls[0]["usage_estimated"] is True


def test_malformed_base_url_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NO_KEY_VAR, "sk-test-key")  # past the key check, which comes first for a remote URL
    with pytest.raises(ProposerError) as info:
        LlmProposer(LlmSettings(base_url="http://[::1", model="m", api_key_env=NO_KEY_VAR), load_rules())
    assert str(info.value).startswith("llm.base_url 'http://[::1' is not a usable URL")
