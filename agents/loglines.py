"""Reading a serving engine's log: kernel selection lines, the KV budget, and why a launch died.

Why from the log: the engine's own "Using ... / Selected ..." lines are the only record of which kernels
a number was measured with (campaign rule 1), and a failed launch is only useful with the traceback's
innermost frame and the backend set the engine says it accepts (campaign rule 3: eleven arms died on a
refused MoE backend). Pure functions over text, so they are tested on real lines
(``tests/fixtures/vllm_logs/``). Both the agent and the console import this module.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from agents.protocol import KernelCategory

MAX_LINE_CHARS = 2000

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_KV_SIZE = re.compile(r"KV cache size: ([\d,]+) tokens")
_MAX_CONC = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_POTENTIAL = re.compile(r"out of potential backends: (\[.*?\]|\(.*?\))")
# The two refusals of vLLM 0.32 that name what the engine would take instead (its fused_moe/oracle/*.py):
# a backend name the quantisation has no kernel for ("moe_backend='triton' is not supported for NvFP4 MoE.
# Expected one of ['b12x', ...]") and a model whose SwiGLU clamp the backend lacks ("... Use 'b12x', ...,
# or 'humming' instead."). Its third, "... does not support the deployment configuration since ...", names
# no set at all: the real CPU refusal (tests/fixtures/vllm_logs/cpu-moe-backend-refused.log) is one.
_EXPECTED = re.compile(r"Expected one of (\[.*?\])")
_USE_INSTEAD = re.compile(r"\. Use ('[^']+'(?:, '[^']+')*,? or '[^']+') instead")
_QUOTED = re.compile(r"'([^']+)'")
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (.+)$')
_WRAPPER_HINTS = ("See root cause above", "initialization failed", "EngineDeadError")


def clean(line: str, limit: int = MAX_LINE_CHARS) -> str:
    """A log line without ANSI escapes or trailing whitespace, bounded in length."""
    return _ANSI.sub("", line).rstrip()[:limit]


_CONFIG_FLAGS = (re.compile(r"enable_flashinfer_autotune=\w+"), re.compile(r"enable_prefix_caching=\w+"))
"""Settings kept beside the ``KernelConfig``: the flashinfer autotune that campaign rule 5 is about, and
whether the engine caches prefixes (a number measured with it on is only comparable with its like)."""


def config_excerpt(line: str) -> str:
    """The ``KernelConfig(...)`` part of an engine config line (which runs to thousands of characters),
    plus the settings of ``_CONFIG_FLAGS`` the line carries."""
    start = line.find("KernelConfig(")
    if start < 0:
        return line[:MAX_LINE_CHARS]
    depth = 0
    end = len(line)
    for i in range(start + len("KernelConfig"), len(line)):
        depth += {"(": 1, ")": -1}.get(line[i], 0)
        if depth == 0:
            end = i + 1
            break
    excerpt = line[start:end]
    if line[:start].endswith("kernel_config="):
        excerpt = "kernel_config=" + excerpt
    for flag in _CONFIG_FLAGS:
        found = flag.search(line)
        if found and found.group(0) not in excerpt:
            excerpt += " " + found.group(0)
    return excerpt[:MAX_LINE_CHARS]


def kernel_category(line: str) -> KernelCategory | None:
    """The category the agent journals a line under: ``config`` for the engine's ``KernelConfig`` (what
    was asked), the layer kind of a kernel selection line (what was used), None for anything else."""
    if "KernelConfig(" in line or "kernel_config=" in line:
        return "config"
    found = _selection(line)
    return found[0] if found is not None else None


@dataclass(frozen=True)
class KvBudget:
    kv_cache_tokens: int | None
    max_concurrency: float | None


def kv_budget(line: str) -> KvBudget | None:
    """The engine's "KV cache size: N tokens, Maximum concurrency ...: X x" line (one or both halves)."""
    size = _KV_SIZE.search(line)
    conc = _MAX_CONC.search(line)
    if not size and not conc:
        return None
    return KvBudget(
        kv_cache_tokens=int(size.group(1).replace(",", "")) if size else None,
        max_concurrency=float(conc.group(2)) if conc else None,
    )


def _listed(text: str) -> list[str]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return [s.strip(" '\"") for s in text.strip("[]()").split(",") if s.strip()]
    return [str(v) for v in value]


def backend_set(line: str) -> list[str] | None:
    """The backends an engine chose from ("Using X ... out of potential backends: [...]")."""
    m = _POTENTIAL.search(line)
    return _listed(m.group(1)) if m else None


def accepted_set(line: str) -> list[str] | None:
    """The backends a refusal says the engine takes instead; None when the line names no such set."""
    m = _EXPECTED.search(line)
    if m:
        return _listed(m.group(1))
    m = _USE_INSTEAD.search(line)
    return _QUOTED.findall(m.group(1)) if m else None


@dataclass(frozen=True)
class Failure:
    reason: str
    backends_accepted: list[str] | None
    """None: the engine printed no accepted set (not "it accepts none")."""


def failure_reason(lines: list[str], exit_code: int | None) -> Failure:
    """Why a server died, from the tail of its log: the innermost frame and the final exception line.

    Engines wrap the real error ("Engine core initialization failed. See root cause above"); the
    traceback whose exception is not such a wrapper is the root cause, so it is preferred.
    """
    tracebacks = _tracebacks([clean(x) for x in lines])
    chosen = None
    for tb in reversed(tracebacks):
        if not any(h in tb[1] for h in _WRAPPER_HINTS):
            chosen = tb
            break
    if chosen is None and tracebacks:
        chosen = tracebacks[-1]
    accepted: list[str] | None = None
    for line in lines:
        found = accepted_set(line)
        if found is not None:
            accepted = found
    if chosen is not None:
        frame, exc = chosen
        reason = f"{exc} (at {frame})" if frame else exc
    else:
        last = next((clean(x) for x in reversed(lines) if clean(x)), "")
        reason = f"exited with code {exit_code} before serving"
        if last:
            reason += f"; last log line: {last}"
    return Failure(reason=reason[:MAX_LINE_CHARS], backends_accepted=accepted)


def _tracebacks(lines: list[str]) -> list[tuple[str | None, str]]:
    """(innermost frame "file:line in func", exception line) for each traceback in the lines.

    Each line may carry a logger/process prefix ("(EngineCore pid=7) ERROR ... [core.py:1] "): the
    prefix before "Traceback" is stripped from the lines that follow it.
    """
    found: list[tuple[str | None, str]] = []
    i = 0
    while i < len(lines):
        pos = lines[i].find(_TRACEBACK)
        if pos < 0:
            i += 1
            continue
        prefix = lines[i][:pos]
        frame: str | None = None
        exc = ""
        i += 1
        while i < len(lines):
            body = lines[i][len(prefix) :] if prefix and lines[i].startswith(prefix) else lines[i]
            m = _FRAME.match(body)
            if m:
                frame = f"{m.group(1)}:{m.group(2)} in {m.group(3)}"
            elif body.startswith((" ", "\t")) or not body.strip() or set(body.strip()) <= set("^~ "):
                pass
            else:
                exc = body.strip()
                break
            i += 1
        if exc:
            found.append((frame, exc))
        i += 1
    return found


# -- kernel selection lines (campaign rule 1: "always read the Using ... Kernel line") ---------------------

KERNEL_KINDS = ("linear", "moe", "attention")
"""The layer kinds an arm asks a backend for, and that every measured row is checked on."""

KernelKind = Literal["linear", "moe", "attention", "other"]
"""The layer kind of a kernel the engine selected: a ``kernel_line`` event's category besides ``config``."""

AS_REQUESTED = "as-requested"
FALLBACK = "fallback"
NOT_REPORTED = "not-reported"


@dataclass(frozen=True)
class KernelRecord:
    """One kernel the engine said it selected."""

    kind: str
    """A ``KernelKind``: ``linear``, ``moe``, ``attention``, or ``other`` (a kernel of another stage: MoE
    dispatch, MLA prefill, the vision encoder's attention, the sampler...), which no arm requests."""
    kernel: str
    """As the engine names it: ``B12xNvFp4LinearKernel``, ``FLASHINFER_CUTLASS``, ``FlashInfer CUTLASS``."""
    scope: str
    """What it was selected for, in the engine's words (``NVFP4 GEMM``, ``NvFp4 MoE``), or ''."""
    line: str


_SOURCE = re.compile(r"\[?([\w.-]+\.py):\d+\]\s+")
"""vLLM's ``[cuda.py:507] `` before the message (``cuda.py:507] `` before vLLM 0.6)."""
_BARE_PREFIX = re.compile(r"^\s*(?:\([^)]*\)\s*)?(?:(?:INFO|WARNING|DEBUG)\b:?\s*)?")
_PLATFORM_SOURCES = frozenset(
    {"cuda.py", "rocm.py", "cpu.py", "xpu.py", "tpu.py", "hpu.py", "selector.py", "interface.py"}
)
"""Where vLLM picks the attention backend: a bare "Using X backend." from these names one."""
_MOE_SOURCES = frozenset({"mxfp4.py"})
"""vLLM 0.18's MXFP4 MoE said only "Using Marlin backend" (tests/fixtures/vllm_logs/kernel-lines.tsv)."""
_ATTENTION_WORDS = re.compile(r"attn|attention|sdpa|mla|flash|xformers|pallas|triton", re.IGNORECASE)

# (kind, scope when the line names none, pattern) in the order tried; each is matched at the start of
# the message and comes from a vLLM source line cited in tests/fixtures/vllm_logs/kernel-lines.tsv.
_KERNEL_PATTERNS: tuple[tuple[KernelKind, str, re.Pattern[str]], ...] = (
    (
        "moe",
        "",
        re.compile(  # "Using 'FLASHINFER_CUTLASS' NvFp4 MoE backend", "Using CPU Unquantized MoE backend"
            r"Using (?P<k>'[^']+'|\S+(?: \S+)??) (?P<scope>(?:(?:Unquantized|[A-Za-z]*\d\w*)(?: Int8)? )?"
            r"(?i:moe)(?: LoRA)?) backend\b"
        ),
    ),
    (
        "moe",
        "MoE experts",
        re.compile(r"Using (?P<k>\w*Experts\w*)(?: \([^)]*\))?(?: for (?P<scope>[^.]+))?\.?$"),
    ),
    ("other", "MoE prepare/finalize", re.compile(r"Using (?P<k>\w*PrepareAndFinalize\w*)\.?$")),
    ("linear", "", re.compile(r"(?:Using|Selected) (?P<k>\w+Kernel) for (?P<scope>.+?)\.?$")),
    ("linear", "", re.compile(r"Using (?P<k>FlashInfer \S+) for (?P<scope>eligible unquantized BF16 GEMMs)")),
    ("linear", "", re.compile(r"\[zen_cpu\] Using (?P<k>zentorch_\w+) for (?P<scope>[^(]+?)\s*(?:\(|$)")),
    (
        "other",
        "",
        re.compile(
            r"Using (?:backend )?(?:AttentionBackendEnum\.)?(?P<k>\S+) for "
            r"(?P<scope>vit attention|MMEncoderAttention)"
        ),
    ),
    ("other", "MLA prefill", re.compile(r"Using (?P<k>.+?) MLA prefill backend")),
    ("other", "GDN prefill", re.compile(r"Using (?P<k>.+?) GDN prefill kernel")),
    ("other", "", re.compile(r"Using (?P<k>\S+) (?P<scope>Mamba SSU|ReplaySSM) backend")),
    ("other", "top-p & top-k sampling", re.compile(r"Using (?P<k>.+?) for top-p & top-k sampling")),
    ("attention", "", re.compile(r"Using (?:AttentionBackendEnum\.)?(?P<k>\w+) attention backend\b")),
    ("attention", "", re.compile(r"Using (?P<k>[A-Z][A-Z0-9_]*) for attention\.?$")),
    ("attention", "", re.compile(r"Using AttentionBackendEnum\.(?P<k>\w+) backend\b")),
    (
        "attention",
        "",
        re.compile(
            r"Using (?P<k>[A-Z][A-Z0-9_]*) backend"
            r"(?: out of potential backends\b| \(selected via --attention-backend\))"
        ),
    ),
)
_NAMED_BACKEND = (
    re.compile(  # older and non-CUDA platforms: "Using Torch SDPA backend.", "Using Marlin backend"
        r"Using (?P<k>[A-Z][\w-]*(?: [A-Z][\w-]*){0,3}(?: attention)?) backend(?P<rest>\.?|(?: \S.*))$"
    )
)


def parse_kernel_line(line: str) -> KernelRecord | None:
    """The kernel a genuine kernel-selection line names, or None for any other line.

    Only lines in the formats vLLM prints when it picks a linear, MoE or attention kernel (or a kernel
    of another stage) qualify, so log noise that happens to say "Using" ("Using max model len 2048",
    "Warning: NUMA binding: Using MEMBIND policy") is never taken for a kernel.
    """
    found = _selection(line)
    return KernelRecord(*found, line) if found is not None else None


def _selection(line: str) -> tuple[KernelKind, str, str] | None:
    """(kind, kernel, scope) of a kernel-selection line (``parse_kernel_line``), or None."""
    source_match = _SOURCE.search(line)
    if source_match:
        source, message = source_match.group(1), line[source_match.end() :]
    else:
        source, message = None, _BARE_PREFIX.sub("", line, count=1)
    message = message.strip()
    for kind, scope, pattern in _KERNEL_PATTERNS:
        m = pattern.match(message)
        if m:
            found = m.groupdict()
            return kind, found["k"].strip("'"), found.get("scope") or scope
    m = _NAMED_BACKEND.match(message)
    if m is None:
        return None
    name, rest = m.group("k"), m.group("rest")
    if source in _MOE_SOURCES or re.search(r"mxfp4|moe", name, re.IGNORECASE):
        return "moe", name, "MoE"
    if re.search(r"\bvit\b", rest, re.IGNORECASE):
        return "other", name, "vit attention"
    if source in _PLATFORM_SOURCES or (source is None and _ATTENTION_WORDS.search(name)):
        return "attention", name, ""
    return None


def kernel_records(lines: Iterable[str]) -> list[KernelRecord]:
    """The kernel records of ``lines``, in order, each (kind, kernel, scope) once."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for line in lines:
        record = parse_kernel_line(line)
        if record is not None and (record.kind, record.kernel, record.scope) not in seen:
            seen.add((record.kind, record.kernel, record.scope))
            out.append(record)
    return out


# -- what the arm asked for against what the engine used ---------------------------------------------

_REQUEST_FLAGS = {
    "--kernel-config.linear-backend": "linear",
    "--linear-backend": "linear",
    "--kernel-config.moe-backend": "moe",
    "--moe-backend": "moe",
    "--attention-backend": "attention",
    "--attention-config.backend": "attention",
}
_REQUEST_JSON_FLAGS = {
    "--kernel-config": {"linear_backend": "linear", "moe_backend": "moe"},
    "--attention-config": {"backend": "attention"},
}
ATTENTION_ENV = "VLLM_ATTENTION_BACKEND"
"""How vLLM before the ``--attention-backend`` flag was asked for one; the flag wins when both are set."""


def requested_backends(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
    """The backend an arm's argv and environment ask for, per layer kind (``auto`` when unset), spelt as
    vLLM normalises it: linear and MoE names lower case with underscores, attention names upper case.

    The last occurrence of a flag wins, as in vLLM's argument parser; ``--kernel-config '{json}'`` and
    ``--attention-config '{json}'`` are read too.
    """
    asked = dict.fromkeys(KERNEL_KINDS, "auto")
    if env.get(ATTENTION_ENV):
        asked["attention"] = env[ATTENTION_ENV]
    i = 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        flag = name.replace("_", "-")  # vLLM reads --kernel-config.moe_backend and ...moe-backend alike
        if (flag in _REQUEST_FLAGS or flag in _REQUEST_JSON_FLAGS) and not eq:
            i += 1
            if i == len(argv):
                break
            value = argv[i]
        if flag in _REQUEST_FLAGS:
            asked[_REQUEST_FLAGS[flag]] = value
        elif flag in _REQUEST_JSON_FLAGS:
            try:
                data = json.loads(value)
            except ValueError:
                data = None
            for key, kind in _REQUEST_JSON_FLAGS[flag].items():
                if isinstance(data, dict) and isinstance(data.get(key), str):
                    asked[kind] = data[key]
        i += 1
    return {
        kind: "auto"
        if value.lower() == "auto"
        else value.upper()
        if kind == "attention"
        else value.lower().replace("-", "_")
        for kind, value in asked.items()
    }


KERNEL_NAMES: dict[str, dict[str, str]] = {
    "linear": {  # vLLM 0.32 model_executor/kernels/linear/__init__.py _LINEAR_BACKEND_KERNEL_MAP
        "b12x": r"b12x",  # B12xNvFp4LinearKernel, B12xNvFp4W4A16LinearKernel, B12xFp8BlockScaledMMKernel...
        "flashinfer_b12x": r"flashinferb12x",  # FlashInferB12xNvFp4LinearKernel
        "cutlass": r"cutlass",  # CutlassNvFp4LinearKernel, CutlassFP8ScaledMMLinearKernel...
        "flashinfer_cutlass": r"flashinfer(cutlass|fp8scaledmm|fp8deepgemm|mxfp4linear)",
        "flashinfer_cutedsl": r"flashinfercutedsl",  # FlashInferCuteDslNvFp4W4A16LinearKernel, "FlashInfer cute-dsl"
        "flashinfer_trtllm": r"flashinfertrtllm",
        "flashinfer_cudnn": r"flashinfercudnn",
        "marlin": r"marlin",  # MarlinLinearKernel, MarlinNvFp4LinearKernel...
        "triton": r"triton",
        "deep_gemm": r"deepgemm",
        "torch": r"(pertensor|channelwise|rowwise|blockwise)?torch",
        "xpu": r"xpu(w8a8fp8|fp8blockscaled)",
        "xpu_woq": r"xpuw8a16",
    },
    "moe": {  # vLLM 0.32 fused_moe/oracle/*.py: backend names and the experts classes they log
        "b12x": r"(w4a\d+)?b12x",  # 'B12X', 'B12X_MXFP4_BF16', W4A4B12xExperts
        "flashinfer_b12x": r"flashinferb12x",
        "flashinfer_cutlass": r"flashinfer(\w*cutlass|experts$)",  # FLASHINFER_CUTLASS, "FlashInfer CUTLASS"
        "flashinfer_trtllm": r"flashinfer(\w*trtllm|experts$)|trtllm",
        "flashinfer_cutedsl": r"flashinfercutedsl",
        "flashinfer_moe_ep_cutedsl": r"flashinfermoeep",
        "cutlass": r"(batched)?vllmcutlass|cutlass(batched)?experts",  # 'VLLM_CUTLASS', CutlassExpertsFp4
        "triton": r"(batched|oai|unfusedoai)?triton",  # TRITON, BATCHED_TRITON, TritonExperts
        "marlin": r"(batched)?marlin",  # 'MARLIN', MarlinExperts, vLLM 0.18's "Marlin"
        "deep_gemm": r"(batched)?deepgemm",
        "humming": r"(batched)?humming",
        "aiter": r"(rocm)?aiter",  # "ROCm AITER"
        "emulation": r"\w*emulation",
    },
    "attention": {  # AttentionBackendEnum names, and the words vLLM used for them before it printed those
        "FLASH_ATTN": r"flash(attn|attention)$",
        "FLASHINFER": r"flashinfer$",
        "TORCH_SDPA": r"torchsdpa$",
        "TRITON_ATTN": r"triton(attn|attention)?$",
        "XFORMERS": r"xformers$",
    },
}
"""Requested backend -> the kernel names it covers: a regular expression matched at the start of the
name lower-cased without punctuation ("FlashInfer CUTLASS" -> "flashinfercutlass"). A linear or MoE
backend not listed covers names that start with it; an attention backend not listed, its own name only."""


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def backend_covers(kind: str, requested: str, kernel: str) -> bool:
    """Whether ``kernel`` (as the engine named it) is what asking for ``requested`` gives."""
    if requested == "auto":
        return True
    pattern = KERNEL_NAMES.get(kind, {}).get(requested)
    if pattern is None:
        pattern = re.escape(_squash(requested)) + ("$" if kind == "attention" else "")
    return re.match(pattern, _squash(kernel)) is not None


@dataclass(frozen=True)
class KernelCheck:
    """One layer kind of a launch: what the arm asked for and what the engine said it used."""

    kind: str
    requested: str
    """``auto`` when the arm did not ask: then any kernel is as requested."""
    status: str
    """``as-requested``, ``fallback`` (the engine used another kernel for some layer), ``not-reported``."""
    used: tuple[str, ...]
    """Every kernel the engine named for this kind, in log order, once each."""
    other_than_requested: tuple[str, ...]

    @property
    def text(self) -> str:
        """``linear: asked b12x, used MarlinNvFp4LinearKernel`` for a fallback."""
        return f"{self.kind}: asked {self.requested}, used {', '.join(self.other_than_requested)}"


def check_kernels(requested: Mapping[str, str], records: Iterable[KernelRecord]) -> tuple[KernelCheck, ...]:
    """Per layer kind, whether the engine used what was asked, something else (which), or said nothing.

    A model has several linear layer types (NVFP4 projections beside FP8 attention ones, campaign rule 2):
    one of them on another kernel is a fallback even when the others got the requested one.
    """
    records = list(records)
    checks = []
    for kind in KERNEL_KINDS:
        asked = requested.get(kind) or "auto"
        used = tuple(dict.fromkeys(r.kernel for r in records if r.kind == kind))
        others = tuple(k for k in used if not backend_covers(kind, asked, k))
        status = NOT_REPORTED if not used else FALLBACK if others else AS_REQUESTED
        checks.append(KernelCheck(kind, asked, status, used, others))
    return tuple(checks)


def kernel_fallback(checks: Iterable[KernelCheck]) -> bool:
    """Whether a row measured on these kernels is marked ``kernel_fallback``."""
    return any(c.status == FALLBACK for c in checks)
