"""The LLM proposer: rewrites from an OpenAI-compatible chat-completions endpoint.

One :class:`LlmProposer` serves one optimize run. Each :meth:`LlmProposer.propose` sends the prompt
of :mod:`kernellsp.optimize.propose.prompt` and parses the answer strictly: one JSON object (optionally in
one ```json fenced block) ::

    {"candidates": [{"description": str, "rules": [str], "predicted_gain_pct": number,
                     "launch": null | {"grid": ..., "block": ..., "smem": ...}, "code": str}]}

``code`` must hold the target's full definition and nothing but ``__device__`` helpers besides; it
is spliced into the current text (:func:`~kernellsp.optimize.propose.base.splice_kernel`), the launch is
validated against the spec, and the result must pass :func:`kernellsp.optimize.verify.scope.check_scope`. Any
problem is a parse error: the answer goes back to the model with the exact error, at most
:data:`MAX_RETRIES` times. Correctness is never judged here; the verification gate does that.

The run has a token budget (``llm.max_tokens_per_run``), summed over every call's reported usage.
Every call is recorded in :attr:`LlmProposer.calls` for the evidence bundle. Network and HTTP
failures become a :class:`ProposerError` with one line naming the endpoint, the model and the fix;
the API key never appears in messages, records or logs.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import socket
import ssl
import time
from typing import Any
from urllib.parse import urlparse

import openai

from kernellsp.optimize.propose.base import Candidate, ProposalContext, ProposerError, splice_kernel
from kernellsp.optimize.propose.llm_answer import AnswerError, extract_json, is_dim, is_number, type_name
from kernellsp.optimize.propose.prompt import ANSWER_FIELDS, build_messages, retry_messages
from kernellsp.optimize.verify.scope import check_scope, edit_targets
from kernellsp.rules.engine import RuleSet, load_rules
from kernellsp.settings import LlmSettings
from kernellsp.source import spec as specmod
from kernellsp.source.model import parse_source

log = logging.getLogger(__name__)

#: Retries after an unusable answer (so at most MAX_RETRIES + 1 calls per propose).
MAX_RETRIES = 2
#: Placeholder key for a local server that needs none.
PLACEHOLDER_KEY = "unused"

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def is_loopback(url: str) -> bool:
    """Is ``url``'s host this machine (localhost, 127.0.0.0/8, ::1)?"""
    try:
        host = urlparse(url).hostname
    except ValueError:
        return False
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LlmProposer:
    """Candidates from an OpenAI-compatible endpoint (``llm.base_url``, ``llm.model``)."""

    name = "llm"

    def __init__(self, settings: LlmSettings, rules: RuleSet | None = None) -> None:
        if not settings.base_url or not settings.model:
            raise ProposerError(
                "the LLM proposer needs llm.base_url and llm.model; set both, or leave "
                "llm.base_url unset to use the built-in tuner"
            )
        self.settings = settings
        self.base_url: str = settings.base_url
        self.model: str = settings.model
        key = os.environ.get(settings.api_key_env, "")
        if not key.strip():
            if not is_loopback(self.base_url):
                raise ProposerError(
                    f"the environment variable {settings.api_key_env} (llm.api_key_env) holding the API key for "
                    f"the LLM at {self.base_url} is not set; export it, name another variable in "
                    "llm.api_key_env, or unset llm.base_url to use the built-in tuner"
                )
            key = PLACEHOLDER_KEY
        self._key = key
        self.rules = rules if rules is not None else load_rules()
        try:
            self.client = openai.OpenAI(
                base_url=self.base_url, api_key=key, timeout=settings.timeout_s, max_retries=0
            )
        except Exception as exc:  # httpx rejects a malformed URL here (InvalidURL), before any call
            raise ProposerError(
                f"llm.base_url {self.base_url!r} is not a usable URL ({exc}); give the server's "
                "address, e.g. http://127.0.0.1:8000/v1"
            ) from None
        #: Tokens reported by the endpoint over every call of this run (estimated where it reports none).
        self.tokens_used = 0
        #: One record per call: attempt, tokens, latency, outcome (for the evidence bundle).
        self.calls: list[dict[str, Any]] = []
        #: Parsed candidates that were not returned, and why (already tried, duplicate, unchanged).
        self.dropped: list[dict[str, Any]] = []

    # ----------------------------------------------------------------------------------------------

    @property
    def token_budget(self) -> int:
        return self.settings.max_tokens_per_run

    @property
    def tokens_left(self) -> int:
        return max(0, self.token_budget - self.tokens_used)

    def propose(self, ctx: ProposalContext, k: int) -> list[Candidate]:
        """Up to ``k`` new candidates; raises :class:`ProposerError` when none can be had."""
        if k <= 0:
            return []
        fn = ctx.model.function(ctx.entry)
        if fn is None or not fn.has_body:
            raise ProposerError(f"{ctx.entry} is not defined in {ctx.path}: nothing to rewrite")
        messages = build_messages(ctx, self.rules, k)
        error = ""
        for attempt in range(1, MAX_RETRIES + 2):
            answer = self._call(messages, attempt, ctx.round)
            record = self.calls[-1]
            try:
                out = self.parse_answer(answer, ctx, k)
            except AnswerError as exc:
                error = str(exc)
                if record.get("finish_reason") == "length":
                    error += " (the answer was cut off at the length limit: give fewer or shorter candidates)"
                record["outcome"] = "parse_error"
                record["parse_error"] = error
                log.info("LLM answer %d unusable: %s", attempt, error)
                messages = [*messages, *retry_messages(answer, error)]
                continue
            record["outcome"] = "ok"
            record["candidates"] = len(out)
            return out
        raise ProposerError(
            f"the LLM ({self.model} at {self.base_url}) gave no usable answer in "
            f"{MAX_RETRIES + 1} attempts; last parse error: {error}"
        )

    # ----------------------------------------------------------------------------------------------
    # The call

    def _call(self, messages: list[dict[str, str]], attempt: int, round_: int) -> str:
        if self.tokens_used >= self.token_budget:
            raise ProposerError(
                f"LLM token budget of {self.token_budget} tokens is spent ({self.tokens_used} used in this run); "
                "raise llm.max_tokens_per_run to allow more"
            )
        record: dict[str, Any] = {
            "attempt": attempt,
            "round": round_,
            "model": self.model,
            "messages": len(messages),
        }
        self.calls.append(record)
        t0 = time.monotonic()
        try:
            resp: Any = self.client.chat.completions.create(model=self.model, messages=messages)  # type: ignore[arg-type]
        except openai.APIError as exc:
            record["latency_s"] = round(time.monotonic() - t0, 3)
            msg = self._scrub(self._describe(exc))
            record["outcome"] = "error"
            record["error"] = msg
            log.info("%s", msg)
            raise ProposerError(msg) from None
        except (openai.OpenAIError, ValueError, TypeError) as exc:
            # ValueError/TypeError: a 200 answer whose body the client cannot decode (e.g. broken JSON).
            record["latency_s"] = round(time.monotonic() - t0, 3)
            msg = self._scrub(f"the LLM call to {self.base_url} (model {self.model}) failed: {exc}")
            record["outcome"] = "error"
            record["error"] = msg
            raise ProposerError(msg) from None
        record["latency_s"] = round(time.monotonic() - t0, 3)
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list) or not choices:
            record["outcome"] = "error"
            msg = (
                f"the LLM at {self.base_url} did not answer in the OpenAI chat-completions format; check "
                "llm.base_url (it usually ends in /v1)"
            )
            record["error"] = msg
            raise ProposerError(msg)
        msg_obj = getattr(choices[0], "message", None)
        raw = getattr(msg_obj, "content", None)
        content = raw if isinstance(raw, str) else "" if raw is None else str(raw)
        finish = getattr(choices[0], "finish_reason", None)
        usage = getattr(resp, "usage", None)
        prompt_t: Any = getattr(usage, "prompt_tokens", None)
        completion_t: Any = getattr(usage, "completion_tokens", None)
        total_t: Any = getattr(usage, "total_tokens", None)
        if not is_number(total_t) or total_t < 0:
            if is_number(prompt_t) and is_number(completion_t) and prompt_t >= 0 and completion_t >= 0:
                total_t = prompt_t + completion_t
            else:
                # No usage reported: estimate (about 4 characters per token) so the budget still holds.
                prompt_t = sum(len(m["content"]) for m in messages) // 4
                completion_t = len(content) // 4
                total_t = prompt_t + completion_t
                record["usage_estimated"] = True
        self.tokens_used += int(total_t)
        record.update(
            prompt_tokens=prompt_t,
            completion_tokens=completion_t,
            total_tokens=int(total_t),
            finish_reason=finish,
            answer=content,
        )
        log.info("LLM call %d: %s tokens in %.1f s", attempt, total_t, record["latency_s"])
        return content

    def _scrub(self, text: str) -> str:
        if self._key and self._key != PLACEHOLDER_KEY and len(self._key) >= 4:
            text = text.replace(self._key, "***")
        return text

    def _describe(self, exc: openai.APIError) -> str:
        where = f"the LLM at {self.base_url}"
        if isinstance(exc, openai.APITimeoutError):
            return (
                f"{where} (model {self.model}) did not answer within {self.settings.timeout_s:g} s (timeout); "
                "raise llm.timeout_s or check that the server is not overloaded"
            )
        if isinstance(exc, openai.APIConnectionError):
            return (
                f"cannot reach {where}: {_connection_reason(exc)}; check llm.base_url or unset it to use "
                "the built-in tuner"
            )
        if isinstance(exc, openai.APIStatusError):
            code = exc.status_code
            detail = _error_detail(exc)
            fix = {
                400: "the server refused the request; check llm.model",
                401: f"check the API key in ${self.settings.api_key_env} (llm.api_key_env)",
                403: f"check the API key in ${self.settings.api_key_env} and its access to the model",
                404: "check llm.model and llm.base_url (the path usually ends in /v1)",
                408: "the server timed out; try again",
                413: "the prompt is too large for the server",
                429: "rate limited or out of quota; wait, or lower optimize_candidates",
            }.get(
                code,
                "the server failed; try again later or check its logs"
                if code >= 500
                else "check llm.base_url and llm.model",
            )
            return f"{where} answered HTTP {code} for model {self.model}: {detail}; {fix}"
        return f"{where} (model {self.model}) failed: {' '.join(str(exc).split())[:200]}"

    # ----------------------------------------------------------------------------------------------
    # The answer

    def parse_answer(self, content: str, ctx: ProposalContext, k: int) -> list[Candidate]:
        """The new candidates of an answer; :class:`AnswerError` for anything unusable."""
        data = extract_json(content)
        if not isinstance(data, dict):
            raise AnswerError(
                f"the answer must be a JSON object with the key 'candidates', got {type_name(data)}"
            )
        extra = sorted(set(data) - {"candidates"})
        if "candidates" not in data:
            raise AnswerError(
                "the JSON object has no 'candidates' list"
                + (f" (it has {', '.join(map(repr, extra))})" if extra else "")
            )
        if extra:
            raise AnswerError(
                f"unknown top-level field(s) {', '.join(map(repr, extra))}; only 'candidates' is allowed"
            )
        items = data["candidates"]
        if not isinstance(items, list):
            raise AnswerError(f"'candidates' must be a list, got {type_name(items)}")
        if not items:
            raise AnswerError("'candidates' is empty; propose at least one candidate")
        items = items[:k]
        errors: list[str] = []
        built: list[Candidate] = []
        for i, item in enumerate(items, 1):
            try:
                built.append(self._candidate(item, i, ctx))
            except AnswerError as exc:
                errors.append(str(exc))
        if errors:
            shown = "; ".join(errors[:4]) + (f"; and {len(errors) - 4} more" if len(errors) > 4 else "")
            raise AnswerError(shown)
        tried = ctx.tried_keys()
        out: list[Candidate] = []
        seen: set[str] = set()
        current = Candidate(text=ctx.text, description="", proposer=self.name).key
        for c in built:
            why = (
                "already tried"
                if c.key in tried
                else "duplicate"
                if c.key in seen
                else "no change"
                if c.key == current
                else None
            )
            if why:
                self.dropped.append(
                    {"key": c.key, "description": c.description, "reason": why, "round": ctx.round}
                )
                continue
            seen.add(c.key)
            out.append(c)
        return out

    def _candidate(self, item: Any, i: int, ctx: ProposalContext) -> Candidate:
        where = f"candidate {i}"
        if not isinstance(item, dict):
            raise AnswerError(f"{where}: must be an object, got {type_name(item)}")
        missing = [f for f in ANSWER_FIELDS if f not in item]
        extra = sorted(set(item) - set(ANSWER_FIELDS))
        if missing:
            raise AnswerError(f"{where}: missing field(s) {', '.join(map(repr, missing))}")
        if extra:
            raise AnswerError(
                f"{where}: unknown field(s) {', '.join(map(repr, extra))} (allowed: "
                f"{', '.join(ANSWER_FIELDS)})"
            )
        desc, rules, gain, launch_raw, code = (item[f] for f in ANSWER_FIELDS)
        if not isinstance(desc, str) or not desc.strip():
            raise AnswerError(f"{where}: 'description' must be a non-empty string, got {type_name(desc)}")
        if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
            raise AnswerError(f"{where}: 'rules' must be a list of rule codes (strings)")
        if not is_number(gain):
            raise AnswerError(f"{where}: 'predicted_gain_pct' must be a finite number, got {type_name(gain)}")
        if not isinstance(code, str) or not code.strip():
            raise AnswerError(f"{where}: 'code' must be a non-empty string holding the kernel's definition")
        launch = self._launch(launch_raw, where, ctx)
        self._check_code_shape(code, where, ctx)
        try:
            text = splice_kernel(ctx.text, ctx.entry, code, launch)
        except ProposerError as exc:
            raise AnswerError(f"{where}: {exc}") from None
        scope = check_scope(
            ctx.text, text, edit_targets(ctx.model, ctx.entry) or [ctx.entry], ctx.path, ctx.entry
        )
        if not scope.ok:
            raise AnswerError(f"{where}: out of scope: {scope.reason}")
        return Candidate(
            text=text,
            description=" ".join(desc.split())[:300],
            proposer=self.name,
            rules=[r.strip() for r in rules if r.strip()],
            predicted_gain_pct=float(gain),
        )

    def _launch(self, raw: Any, where: str, ctx: ProposalContext) -> specmod.LaunchSpec | None:
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise AnswerError(
                f"{where}: 'launch' must be null or an object with grid, block and smem, got {type_name(raw)}"
            )
        fn = ctx.model.function(ctx.entry)
        if fn is not None and fn.kind != "global":
            raise AnswerError(
                f"{where}: 'launch' must be null: {ctx.entry} is a host launcher that launches its "
                "own kernels"
            )
        if ctx.spec.block is None:
            raise AnswerError(
                f"{where}: 'launch' must be null: the spec of {ctx.entry} lives in "
                f"{ctx.spec.origin_path or 'the workspace settings'}, which a rewrite cannot change"
            )
        extra = sorted(set(raw) - {"grid", "block", "smem"})
        if extra:
            raise AnswerError(
                f"{where}: 'launch' has unknown field(s) {', '.join(map(repr, extra))} "
                "(allowed: grid, block, smem)"
            )
        for key in ("grid", "block"):
            if key not in raw:
                raise AnswerError(f"{where}: 'launch' needs '{key}'")
            v = raw[key]
            ok = is_dim(v) or (isinstance(v, list) and 1 <= len(v) <= 3 and all(is_dim(x) for x in v))
            if not ok:
                raise AnswerError(
                    f"{where}: 'launch.{key}' must be an integer, an expression string or a list "
                    f"of 1 to 3 of those, got {json.dumps(v)[:60]}"
                )
        if "smem" in raw and not is_dim(raw["smem"]):
            raise AnswerError(
                f"{where}: 'launch.smem' must be an integer or an expression string, got "
                f"{json.dumps(raw['smem'])[:60]}"
            )
        try:
            launch = specmod.LaunchSpec.model_validate(raw)
        except ValueError as exc:
            raise AnswerError(f"{where}: 'launch' is not valid: {' '.join(str(exc).split())[:200]}") from None
        # Evaluate it for every shape of the spec, with the same checks as a hand-written spec.
        bound = specmod.BoundSpec(
            spec=ctx.spec.spec.model_copy(update={"launch": launch}), entry=ctx.entry, origin=ctx.spec.origin
        )
        issues = [iss for iss in specmod.validate_against(bound, fn, None) if iss.field.startswith("launch")]
        if issues:
            raise AnswerError(f"{where}: invalid launch: {issues[0].message}")
        return launch

    def _check_code_shape(self, code: str, where: str, ctx: ProposalContext) -> None:
        """``code`` holds the target's definition and ``__device__`` helpers, nothing else."""
        model = parse_source(code)
        data = code.encode()
        keep = bytearray(data)
        for f in model.functions:
            if not f.has_body or not (f.name == ctx.entry or f.kind == "device"):
                continue
            span = f.outer_span or f.span
            keep[span.start_byte : span.end_byte] = b" " * (span.end_byte - span.start_byte)
        rest = _COMMENTS.sub(" ", bytes(keep).decode(errors="replace"))
        rest = re.sub(r'\bextern\s*"C"', " ", rest)
        stray = [ln.strip() for ln in rest.split("\n") if ln.strip() and ln.strip() != ";"]
        if stray:
            raise AnswerError(
                f"{where}: 'code' may hold only the definition of {ctx.entry} and __device__ helper functions, "
                f"but it also has {stray[0][:80]!r} (no includes, macros, global variables, host code or other "
                "kernels)"
            )


def _connection_reason(exc: BaseException) -> str:
    """A short reason for a failed connection: refused, unknown host, TLS, or the library's text."""
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    texts: list[str] = []
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ConnectionRefusedError):
            return "connection refused"
        if isinstance(e, socket.gaierror):
            return "unknown host name (DNS lookup failed)"
        if isinstance(e, ssl.SSLError):
            return f"TLS error ({e.reason or e})"
        if isinstance(e, ConnectionResetError):
            return "connection reset by the server"
        texts.append(str(e))
        for nxt in (e.__cause__, e.__context__):
            if nxt is not None:
                stack.append(nxt)
    joined = " ".join(texts).lower()
    if "refused" in joined or "errno 111" in joined:
        return "connection refused"
    if "name or service not known" in joined or "getaddrinfo" in joined or "nodename nor servname" in joined:
        return "unknown host name (DNS lookup failed)"
    detail = next((t for t in reversed(texts) if t and t != "Connection error."), "connection error")
    return " ".join(detail.split())[:160]


def _error_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    msg: Any = None
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
    if not msg:
        msg = exc.message
    return " ".join(str(msg).split())[:200] or "no detail"
