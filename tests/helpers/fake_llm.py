"""A scripted OpenAI-compatible server for the LLM proposer's tests (127.0.0.1, a free port).

``POST /v1/chat/completions`` answers from a queue of behaviours, one per request:

* ``good``: two correct rewrites of samples/vector_add.cu's kernel (``__restrict__`` + grid-stride
  loop; a float4 path with a scalar tail and a launch change);
* ``good_fenced``: the same answer in a ```json fenced block after a line of prose;
* ``wrong``: a rewrite that compiles but computes ``a - b``;
* ``malformed``: not JSON; ``missing_field``: a candidate without ``code``; ``no_kernel``: code
  that defines only a helper;
* ``scope``: code that also adds an ``#include``; ``scope_signature``: code that changes the
  kernel's signature;
* ``slow``: sleeps ``slow_s`` seconds (past the client's timeout), then answers ``good``;
* ``error``: HTTP 500 with an OpenAI error object;
* ``usage``: the ``good`` answer reporting ``big_usage`` total tokens;
* ``no_choices``: a well-formed completion with an empty ``choices`` list;
* ``echo_key``: HTTP 401 whose message quotes the request's Authorization header (as some proxies do);
* ``broken_body``: HTTP 200, ``Content-Type: application/json``, a body that is not JSON;
* a dict ``{"content": str, "usage": (prompt, completion), "omit_usage": bool}`` for anything else.

An empty queue answers HTTP 500 "script exhausted", so an unexpected extra call fails loudly.
``GET /v1/models`` lists the model. Every request (path, headers, JSON body) is kept in
``requests``.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "fake-cuda-expert"

GRID_STRIDE = """\
__global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n)
{
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        c[i] = a[i] + b[i];
    }
}"""

FLOAT4 = """\
__device__ __forceinline__ float4 add4(float4 x, float4 y)
{
    return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

__global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int nv = n / 4;
    if (t < nv) {
        reinterpret_cast<float4*>(c)[t] = add4(reinterpret_cast<const float4*>(a)[t],
                                               reinterpret_cast<const float4*>(b)[t]);
    }
    int tail = nv * 4 + t;
    if (t < n - nv * 4) {
        c[tail] = a[tail] + b[tail];
    }
}"""

WRONG = """\
__global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] - b[i];
    }
}"""

NO_KERNEL = """\
__device__ float add1(float x, float y) { return x + y; }"""

SCOPE_INCLUDE = "#include <cuda_fp16.h>\n\n" + GRID_STRIDE

SCOPE_SIGNATURE = """\
__global__ void vector_add(const float* a, const float* b, float* c, long n)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}"""


def candidate(
    code: str, description: str, launch: Any = None, rules: list[str] | None = None, gain: float = 5.0
) -> dict[str, Any]:
    return {
        "description": description,
        "rules": rules if rules is not None else ["KL405"],
        "predicted_gain_pct": gain,
        "launch": launch,
        "code": code,
    }


def answer(*cands: dict[str, Any]) -> str:
    return json.dumps({"candidates": list(cands)}, indent=1)


GOOD_CANDIDATES = (
    candidate(GRID_STRIDE, "const __restrict__ inputs and a grid-stride loop"),
    candidate(
        FLOAT4,
        "float4 loads and stores with a scalar tail",
        gain=12.0,
        launch={"grid": "ceil_div(ceil_div(N, 4), BLOCK)", "block": "BLOCK", "smem": 0},
    ),
)


def content_for(behaviour: str) -> str:
    """The answer text of a content behaviour."""
    if behaviour in ("good", "usage", "slow"):
        return answer(*GOOD_CANDIDATES)
    if behaviour == "good_fenced":
        return "Here are my candidates.\n```json\n" + answer(*GOOD_CANDIDATES) + "\n```\n"
    if behaviour == "wrong":
        return answer(candidate(WRONG, "simplified arithmetic", rules=[]))
    if behaviour == "malformed":
        return "I would use float4 loads here: {candidates: [ the kernel with float4 ]"
    if behaviour == "missing_field":
        c = candidate(GRID_STRIDE, "grid-stride loop")
        del c["code"]
        return answer(c)
    if behaviour == "no_kernel":
        return answer(candidate(NO_KERNEL, "a helper"))
    if behaviour == "scope":
        return answer(candidate(SCOPE_INCLUDE, "grid-stride loop with fp16 header"))
    if behaviour == "scope_signature":
        return answer(candidate(SCOPE_SIGNATURE, "64-bit indexing"))
    raise ValueError(f"unknown behaviour {behaviour!r}")


class FakeLlm:
    """The server; use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(
        self, script: list[Any] | None = None, slow_s: float = 5.0, big_usage: int = 1_000_000
    ) -> None:
        self.queue: deque[Any] = deque(script or [])
        self.requests: list[dict[str, Any]] = []
        self.slow_s = slow_s
        self.big_usage = big_usage
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llm", daemon=True
        )
        self._counter = 0

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def script(self, *behaviours: Any) -> None:
        with self._lock:
            self.queue.extend(behaviours)

    def start(self) -> FakeLlm:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeLlm:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------------------------------------

    def _next(self) -> Any:
        with self._lock:
            return self.queue.popleft() if self.queue else None

    def _completion(self, body: dict[str, Any], content: str, usage: tuple[int, int]) -> dict[str, Any]:
        with self._lock:
            self._counter += 1
            n = self._counter
        prompt, completion = usage
        return {
            "id": f"chatcmpl-fake{n:04d}",
            "object": "chat.completion",
            "created": 1_700_000_000 + n,
            "model": body.get("model", MODEL),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def _respond(self, body: dict[str, Any], headers: Any) -> tuple[int, dict[str, Any] | bytes]:
        beh = self._next()
        prompt_tokens = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
        if beh is None:
            return 500, {
                "error": {
                    "message": "script exhausted: unexpected request",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            }
        if isinstance(beh, dict):
            usage = beh.get("usage") or (prompt_tokens, len(beh["content"]) // 4)
            payload = self._completion(body, beh["content"], tuple(usage))
            if beh.get("omit_usage"):
                del payload["usage"]
            return 200, payload
        if beh == "no_choices":
            payload = self._completion(body, "", (prompt_tokens, 0))
            payload["choices"] = []
            return 200, payload
        if beh == "echo_key":
            return 401, {
                "error": {
                    "message": f"invalid credentials: {headers.get('Authorization', '')}",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            }
        if beh == "broken_body":
            return 200, b'{"id": "chatcmpl-broken", "choices": [ {not json'
        if beh == "error":
            return 500, {
                "error": {
                    "message": "The server had an error while processing your request.",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            }
        if beh == "slow":
            self._stop.wait(self.slow_s)
        content = content_for(beh)
        if beh == "usage":
            return 200, self._completion(body, content, (self.big_usage - 1000, 1000))
        return 200, self._completion(body, content, (prompt_tokens, len(content) // 4))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict[str, Any] | bytes) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

            def do_GET(self) -> None:
                fake.requests.append(
                    {"method": "GET", "path": self.path, "headers": dict(self.headers), "body": None}
                )
                if self.path.rstrip("/").endswith("/models"):
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": [
                                {"id": MODEL, "object": "model", "created": 0, "owned_by": "kernellsp-tests"}
                            ],
                        },
                    )
                else:
                    self._no_route()

            def _no_route(self) -> None:
                err = {
                    "message": f"no route {self.path}",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                }
                self._send(404, {"error": err})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode(errors="replace")}
                fake.requests.append(
                    {"method": "POST", "path": self.path, "headers": dict(self.headers), "body": body}
                )
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._no_route()
                    return
                status, payload = fake._respond(body, self.headers)  # case-insensitive .get
                self._send(status, payload)

        return Handler
