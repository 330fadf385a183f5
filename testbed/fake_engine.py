"""A fake serving engine: a real process that behaves like ``vllm serve`` where the sweep looks.

It is installed as ``<env>/bin/vllm`` (``install``) so the agent launches it from a resolved arm's argv,
exactly as it launches vLLM. It prints vLLM-like start-up lines (the engine config with its
``KernelConfig``, the MoE backend it picked "out of potential backends", the KV cache budget), then
serves ``/health``, ``/v1/models``, ``/metrics``, streamed ``/v1/completions`` (the load generator's
framing, from ``bench/zero_server.py``) and ``/v1/chat/completions`` (tripwire answers, from
``testbed/fake_chat_server.py``). Behaviour comes from the environment of the arm:

- ``FAKE_ENGINE_MOE_ACCEPTS="Triton,Marlin"``: a pinned ``--kernel-config.moe_backend`` outside this set is
  refused the way vLLM 0.32 refuses one (a Worker traceback, then the "Engine core initialization failed"
  wrapper, exit 1), ending in one of its two refusal lines (``FAKE_ENGINE_MOE_REFUSAL``): ``expected``
  (default) ``ValueError: moe_backend='x' is not supported for unquantized MoE. Expected one of [...]``, or
  ``unsupported``, the real CPU refusal, which names no set (``... does not support the deployment
  configuration since kernel does not support current device cpu.``);
- ``FAKE_ENGINE_MODE``: ``serve`` (default), ``crash`` (SIGKILLs itself during start-up, no traceback),
  ``degenerate`` (serves, but every chat answer is a loop), ``die-serving`` (exits 1 s after ready);
- ``FAKE_ENGINE_STARTUP_S``: seconds before it listens (default 0.5);
- ``--headless`` (a multi-box arm's data-parallel worker): no API server, it runs until SIGTERM;
  ``FAKE_ENGINE_HEADLESS_MODE`` is its mode (default ``FAKE_ENGINE_MODE``), so a test fails only the worker;
- ``FAKE_ENGINE_KV_TOKENS``: the KV budget it reports (default 4096);
- ``FAKE_ENGINE_ENV_DUMP``: a file it writes its whole environment to (JSON) before anything else.
- ``FAKE_ENGINE_GPU_MIB``: MiB it holds on each GPU of ``CUDA_VISIBLE_DEVICES`` once loaded, told to the fake
  nvidia-smi of its box (testbed/fake_nvidia_smi.py ``tell``), which reports it while the process lives;
  unset: it holds nothing, as a server that is not on the GPU it was given.
- ``FAKE_ENGINE_ITL_MS``: ms between the token events of a streamed completion (default 0: all at once);
- ``FAKE_ENGINE_LINEAR_KERNEL``: the linear kernel it says it selected for NVFP4 GEMMs whatever was asked
  (a GPU engine that fell back, e.g. ``MarlinNvFp4LinearKernel`` when b12x was asked); unset: no line.

Its config line says ``enable_prefix_caching`` as vLLM's does: on unless ``--no-enable-prefix-caching``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testbed.fake_chat_server import BY_PROMPT, answer_for  # noqa: E402
from testbed.fake_nvidia_smi import tell  # noqa: E402
from testbed.zero_server import SSE_HEAD, chunk, prompt_tokens, stream_body, stream_events  # noqa: E402


def install(env_dir: Path, python: str = sys.executable) -> Path:
    """``env_dir/bin/vllm`` running this fake, and ``env_dir/bin/python`` (the serving environment's
    interpreter, where box-side tools such as the tripwire run); returns ``env_dir`` (a serving_env).

    An sshd test box's user cannot run root's interpreter: pass ``box_python.ensure()`` (the system Python
    with openai, as a real serving environment has it)."""
    (env_dir / "bin").mkdir(parents=True, exist_ok=True)
    script = env_dir / "bin" / "vllm"
    script.write_text(f'#!/bin/sh\nexec {python} {Path(__file__).resolve()} "$@"\n')
    script.chmod(0o755)
    interpreter = env_dir / "bin" / "python"  # a script, not a symlink: a venv is found from the real path
    interpreter.write_text(f'#!/bin/sh\nexec {python} "$@"\n')
    interpreter.chmod(0o755)
    return env_dir


def write_model(model_dir: Path, vocab_size: int = 1024) -> Path:
    """A model directory the load generator can read its vocabulary from (the served model's root)."""
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(
        json.dumps({"vocab_size": vocab_size, "eos_token_id": 2, "bos_token_id": 1})
    )
    return model_dir


def _flag(argv: list[str], name: str, default: str | None = None) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else default


def _log(who: str, level: str, where: str, text: str) -> None:
    stamp = time.strftime("%m-%d %H:%M:%S", time.gmtime())
    print(f"({who} pid={os.getpid()}) {level} {stamp} [{where}] {text}", flush=True)


def _refuse(backend: str, accepts: list[str], refusal: str) -> None:
    """The shape of vLLM's real refusal (tests/fixtures/vllm_logs/cpu-moe-backend-refused.log), ending in one
    of the two lines vLLM 0.32's fused_moe/oracle/unquantized.py raises."""
    stamp = time.strftime("%m-%d %H:%M:%S", time.gmtime())
    prefix = f"(Worker pid={os.getpid()}) ERROR {stamp} [multiproc_executor.py:953] "
    if refusal == "unsupported":
        raised = (
            "    raise ValueError(_make_log_unsupported(backend, reason))",
            f"ValueError: Unquantized MoE backend {backend} does not support the deployment configuration "
            "since kernel does not support current device cpu.",
        )
    else:
        raised = (
            "    raise ValueError(",
            f"ValueError: moe_backend='{backend}' is not supported for unquantized MoE. "
            f"Expected one of {accepts!r}.",
        )
    for line in (
        "WorkerProc failed to start.",
        "Traceback (most recent call last):",
        '  File "/fake/vllm/model_executor/layers/fused_moe/oracle/unquantized.py", line 193, in select',
        *raised,
    ):
        print(prefix + line, flush=True)
    print("Traceback (most recent call last):", flush=True)
    print('  File "/fake/vllm/v1/engine/core_client.py", line 101, in __init__', flush=True)
    print(
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
        "{'EngineCore': 1}",
        flush=True,
    )
    sys.exit(1)


def _chat(body: dict[str, Any], model: str, mode: str) -> dict[str, Any]:
    item = BY_PROMPT.get(body["messages"][-1]["content"])
    content, reasoning, finish = answer_for(
        "degenerate" if mode == "degenerate" else "correct", item.expect[0] if item else ""
    )
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    words = len(content.split())
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 20, "completion_tokens": words, "total_tokens": 20 + words},
    }


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the tripwire connects 20 at once; the default backlog of 5 resets some
    daemon_threads = True


def _dump_env(path: str) -> None:
    """The environment this server was given, written whole (tmp + rename) for a test to read."""
    tmp = f"{path}.tmp"
    Path(tmp).write_text(json.dumps(dict(os.environ)))
    os.replace(tmp, path)


@dataclass(frozen=True)
class _ServeArgs:
    """What this fake reads of a ``vllm serve MODEL [flags]`` command line."""

    model_path: str
    served: str
    port: int
    max_len: int
    moe: str
    linear: str | None
    caching: bool


def _parse(argv: list[str]) -> _ServeArgs:
    """The serve command line, or vLLM's usage line and exit 2 when it is not one."""
    if not argv or argv[0] != "serve" or len(argv) < 2:
        print("usage: vllm serve MODEL [flags]", file=sys.stderr)
        sys.exit(2)
    model_path = argv[1]
    return _ServeArgs(
        model_path=model_path,
        served=_flag(argv, "--served-model-name", model_path) or "",
        port=int(_flag(argv, "--port", "8000") or 8000),
        max_len=int(_flag(argv, "--max-model-len", "2048") or 2048),
        moe=_flag(argv, "--kernel-config.moe_backend", "auto") or "",
        linear=_flag(argv, "--kernel-config.linear_backend", "auto"),
        caching="--no-enable-prefix-caching" not in argv,
    )


def _choose_moe_backend(moe: str) -> None:
    """Say which MoE backend it uses, as vLLM does, or refuse a pinned one outside FAKE_ENGINE_MOE_ACCEPTS
    (exit 1)."""
    accepts = [a for a in os.environ.get("FAKE_ENGINE_MOE_ACCEPTS", "Triton").split(",") if a]
    names = {a.lower().replace(" ", "_").replace("-", "_"): a for a in accepts}
    if moe != "auto" and moe not in names:
        _refuse(moe, accepts, os.environ.get("FAKE_ENGINE_MOE_REFUSAL", "expected"))
    chosen = names.get(moe, accepts[0])
    _log(
        "Worker",
        "INFO",
        "unquantized.py:364",
        f"Using {chosen} Unquantized MoE backend out of potential backends: {accepts!r}.",
    )


def _load(served: str) -> None:
    """Hold FAKE_ENGINE_GPU_MIB on each visible GPU (weights and KV cache loaded there) and say the NVFP4
    linear kernel FAKE_ENGINE_LINEAR_KERNEL names, each only when set."""
    visible = [int(g) for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    if os.environ.get("FAKE_ENGINE_GPU_MIB") and visible:
        tell(visible, float(os.environ["FAKE_ENGINE_GPU_MIB"]), f"vllm serve {served}")
    if os.environ.get("FAKE_ENGINE_LINEAR_KERNEL"):  # vLLM's format: kernels/linear/__init__.py
        _log(
            "EngineCore",
            "INFO",
            "__init__.py:683",
            f"Using {os.environ['FAKE_ENGINE_LINEAR_KERNEL']} for NVFP4 GEMM",
        )


def _start_up(args: _ServeArgs, mode: str) -> None:
    """vLLM's start-up up to listening, with the lines the sweep reads: its config, the MoE backend it
    picked (or its refusal), the KV cache budget. ``crash`` mode dies here, before the backend is chosen."""
    _log(
        "APIServer",
        "INFO",
        "api_utils.py:286",
        f"non-default args: {{'model': {args.model_path!r}, 'port': {args.port}}}",
    )
    _log(
        "EngineCore",
        "INFO",
        "core.py:133",
        "Initializing a V1 LLM engine (v0.32.0) with config: "
        f"model={args.model_path!r}, enable_prefix_caching={args.caching}, "
        f"kernel_config=KernelConfig(moe_backend={args.moe!r}, linear_backend={args.linear!r})",
    )
    time.sleep(float(os.environ.get("FAKE_ENGINE_STARTUP_S", "0.5")))
    if mode == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    _choose_moe_backend(args.moe)
    _load(args.served)
    kv_tokens = int(os.environ.get("FAKE_ENGINE_KV_TOKENS", "4096"))
    _log(
        "EngineCore",
        "INFO",
        "kv_cache_utils.py:2327",
        f"CPU KV cache size: {kv_tokens:,} tokens, Maximum "
        f"concurrency for {args.max_len:,} tokens per request: {kv_tokens / args.max_len:.2f}x",
    )


class _Handler(BaseHTTPRequestHandler):
    """The HTTP side: health, models, metrics, streamed completions and chat answers, for the one server this
    process is (``serve`` sets ``args`` and ``mode``)."""

    protocol_version = "HTTP/1.1"
    args: ClassVar[_ServeArgs]
    mode: ClassVar[str]

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        served = self.args.served
        if self.path == "/health":
            self._send(200, b"", "text/plain")
        elif self.path == "/v1/models":
            model = {
                "id": served,
                "object": "model",
                "root": self.args.model_path,
                "max_model_len": self.args.max_len,
            }
            self._send(200, json.dumps({"object": "list", "data": [model]}).encode())
        elif self.path == "/metrics":
            text = f'vllm:num_requests_running{{model_name="{served}"}} 0.0\n'
            self._send(200, text.encode(), "text/plain")
        else:
            self._send(404, b'{"error": "not found"}')

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw)
        if self.path == "/v1/completions":
            self._complete(int(body["max_tokens"]), prompt_tokens(raw))
        elif self.path == "/v1/chat/completions":
            self._send(200, json.dumps(_chat(body, self.args.served, self.mode)).encode())
        else:
            self._send(404, b'{"error": "not found"}')

    def _complete(self, max_tokens: int, prompt: int) -> None:
        """The streamed completion: in one write, or one token event every FAKE_ENGINE_ITL_MS ms, as a server
        that decodes takes time (a run then lasts long enough for its box's 1 Hz samples to cover it)."""
        itl_s = float(os.environ.get("FAKE_ENGINE_ITL_MS", "0")) / 1000
        if not itl_s:
            self.wfile.write(stream_body(self.args.served, max_tokens, prompt))
            return
        self.wfile.write(SSE_HEAD)
        for event in stream_events(self.args.served, max_tokens, prompt):
            self.wfile.write(chunk(event))
            self.wfile.flush()
            time.sleep(itl_s)
        self.wfile.write(b"0\r\n\r\n")

    def _send(self, status: int, data: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _headless(argv: list[str], args: _ServeArgs, mode: str) -> None:
    """``--headless``: data-parallel ranks with no API server, as vLLM runs them on a multi-box arm's other
    boxes; it starts up, says so, and runs until SIGTERM (``crash``: SIGKILLs itself at once, before any
    head could serve; ``die-serving``: exits 1 s after start-up)."""
    if mode == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    _start_up(args, mode)
    ranks = _flag(argv, "--data-parallel-size-local", "1")
    _log("APIServer", "INFO", "serve.py:240", f"Launching {ranks} data parallel engine(s) in headless mode")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if mode == "die-serving":
        threading.Timer(1.0, lambda: os._exit(1)).start()
    stop.wait()


def serve(argv: list[str]) -> None:
    if os.environ.get("FAKE_ENGINE_ENV_DUMP"):
        _dump_env(os.environ["FAKE_ENGINE_ENV_DUMP"])
    args = _parse(argv)
    mode = os.environ.get("FAKE_ENGINE_MODE", "serve")
    if "--headless" in argv:
        _headless(argv, args, os.environ.get("FAKE_ENGINE_HEADLESS_MODE", mode))
        return
    _start_up(args, mode)
    _Handler.args, _Handler.mode = args, mode
    httpd = _Server(("127.0.0.1", args.port), _Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=httpd.shutdown).start())
    _log("APIServer", "INFO", "launcher.py:47", f"Starting vLLM API server 0 on http://127.0.0.1:{args.port}")
    if mode == "die-serving":
        threading.Timer(1.0, lambda: os._exit(1)).start()
    httpd.serve_forever()


if __name__ == "__main__":
    serve(sys.argv[1:])
