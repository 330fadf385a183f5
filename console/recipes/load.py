"""Load recipe TOML into a checked Catalog; every mistake is an error naming file, line and key.

WHY strict: a recipe typo that TOML accepts (``moe_backnd = "marlin"``) silently launches the default
backend, and the campaign measures the wrong thing for a night. Unknown keys, wrong types, unknown
backends and dangling references are all refused here, before anything reaches a box.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from console.errors import InputError
from console.recipes.guard import env_problem, flag_problem, value_problem
from console.recipes.lint import RULES
from console.recipes.model import (
    EXTRA_BODY_SAMPLING,
    TOP_LEVEL_SAMPLING,
    Arm,
    Catalog,
    FlagValue,
    KernelPair,
    Origin,
    Patch,
    Profile,
    ServingProfile,
    Shape,
    Sweep,
)
from console.recipes.multinode import arm_layout_problem
from console.recipes.requirement import REPORTED, parse_requirement
from console.recipes.toml_lines import KeyPath, by_record, key_lines, line_of
from console.recipes.vllm_flags import known_flags

QUANTIZATIONS = ("bf16", "fp8", "nvfp4", "mxfp4", "unknown")
"""``unknown``: the precision is not stated where the profile comes from (the rules that turn on it cannot apply)."""
QUANTIZERS = ("vendor", "modelopt", "compressed-tensors", "qat", "unknown")
QUANT_SCOPES = ("all", "experts")

# Flags resolve writes from first-class keys: a recipe may not set them as free flags, so there is one
# place each is decided. Where a server listens (--host, --port...) is guard.BINDING_FLAGS.
MANAGED_FLAGS = {
    "--model": "the profile's checkpoint is the model",
    "--served-model-name": "use the profile's served_model_name",
    "--tensor-parallel-size": "use tensor_parallel",
    "--data-parallel-size": "use data_parallel",
    "--enable-expert-parallel": "use expert_parallel",
    "--linear-backend": "use linear_backend",
    "--moe-backend": "use moe_backend",
    "--kernel-config.linear_backend": "use linear_backend",
    "--kernel-config.moe_backend": "use moe_backend",
    "--max-num-seqs": "use max_num_seqs",
    "--max-model-len": "use max_model_len",
    "--max-num-batched-tokens": "use max_num_batched_tokens",
    "--block-size": "use block_size",
    "--kv-cache-dtype": "use kv_cache_dtype",
    "--dtype": "use dtype",
    "--enforce-eager": "use enforce_eager",
    "--gpu-memory-utilization": "use gpu_memory_utilization",
    "--reasoning-parser": "use the profile's serving.reasoning_parser",
    "--tool-call-parser": "use the profile's serving.tool_call_parser",
    "--default-chat-template-kwargs": "use the profile's serving.chat_template_kwargs",
}
MANAGED_ENV = {"CUDA_VISIBLE_DEVICES": "resolve assigns GPUs to replicas"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FLAG_NAME = re.compile(r"^--[A-Za-z0-9][A-Za-z0-9_.-]*$")


USER_RECIPES = Path("~/.config/campaign-console/recipes")
SHIPPED = "shipped"


def shipped_recipe_dir() -> Path:
    """The recipes that ship with the console: the data-only ``recipes`` package, found as ``import`` finds it.

    WHY importlib.resources: an installed wheel has no source tree, so a path relative to this file
    would name nothing there (or, worse, a checkout that is not the code running).
    """
    try:
        root = resources.files("recipes")
    except ModuleNotFoundError as exc:
        raise RecipeError(
            "recipes",
            None,
            None,
            "the shipped recipes package is not installed; reinstall "
            "campaign-console (pip install . or pip install -e . in a checkout)",
        ) from exc
    return Path(str(root))  # a package installed from the wheel is a folder; anything else fails as missing


def user_recipe_dir() -> Path | None:
    """The operator's own recipes: ``$CAMPAIGN_RECIPES`` (it must exist), else ``USER_RECIPES`` if present."""
    env = os.environ.get("CAMPAIGN_RECIPES")
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise RecipeError(
                env,
                None,
                None,
                "no such folder, named by $CAMPAIGN_RECIPES; create it with your "
                "own recipes (laid out like the shipped ones) or unset CAMPAIGN_RECIPES",
            )
        return path
    path = USER_RECIPES.expanduser()
    return path if path.is_dir() else None


def recipe_source(origin: Origin) -> str:
    """``shipped`` for a record read from the shipped recipes, else the file it came from."""
    if Path(origin.file).resolve().is_relative_to(shipped_recipe_dir().resolve()):
        return SHIPPED
    return origin.file


def display_path(path: Path) -> str:
    """A path as the operator would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class RecipeError(InputError, ValueError):
    """A recipe cannot be used; ``str()`` reads ``file:line: what 'name': problem``."""

    def __init__(self, file: str, line: int | None, key: str | None, message: str):
        self.file, self.line, self.key, self.problem = file, line, key, message
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {message}")


@dataclass
class _Reader:
    """Takes typed values out of one TOML table; whatever is left over is an unknown key."""

    file: str
    lines: dict[KeyPath, int]
    path: KeyPath
    what: str
    table: dict[str, Any]
    seen: set[str] = field(default_factory=set)

    def fail(self, key: str | None, message: str) -> RecipeError:
        path = self.path + ((key,) if key else ())
        return RecipeError(self.file, line_of(self.lines, path), ".".join(path), f"{self.what}: {message}")

    def _get(self, key: str, required: bool) -> Any:
        self.seen.add(key)
        if key not in self.table:
            if required:
                raise self.fail(None, f"missing required key {key!r}")
            return None
        return self.table[key]

    def text(
        self,
        key: str,
        required: bool = False,
        choices: Iterable[str] | None = None,
        argv: bool = False,
        among: str = "",
    ) -> str | None:
        """A non-empty string; ``argv``: it becomes one element of a server's argv (``guard.value_problem``);
        ``among`` names where ``choices`` come from in the refusal."""
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"{key!r} must be a non-empty string, got {value!r}")
        problem = value_problem(value) if argv else None
        if problem:
            raise self.fail(key, f"{key!r}: {problem}")
        options = list(choices) if choices is not None else None
        if options is not None and value not in options:
            raise self.fail(key, f"{key!r} = {value!r} is not one of{among}: {', '.join(options)}")
        return value

    def integer(self, key: str, minimum: int = 1) -> int | None:
        value = self._get(key, False)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(key, f"{key!r} must be an integer >= {minimum}, got {value!r}")
        return value

    def number(self, key: str, low: float, high: float) -> float | None:
        value = self._get(key, False)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise self.fail(key, f"{key!r} must be a number in [{low}, {high}], got {value!r}")
        return float(value)

    def boolean(self, key: str, default: bool | None = False) -> bool | None:
        value = self._get(key, False)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, f"{key!r} must be true or false, got {value!r}")
        return value

    def str_list(self, key: str) -> list[str]:
        value = self._get(key, False)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(key, f"{key!r} must be a list of strings, got {value!r}")
        return list(value)

    def sub(self, key: str, what: str) -> _Reader | None:
        value = self._get(key, False)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(key, f"{key!r} must be a table, got {value!r}")
        return _Reader(self.file, self.lines, self.path + (key,), what, value)

    def env(self, key: str = "env") -> dict[str, str]:
        sub = self.sub(key, f"{self.what} env")
        if sub is None:
            return {}
        env: dict[str, str] = {}
        for name, value in sub.table.items():
            if not _ENV_NAME.fullmatch(name):
                raise sub.fail(name, f"{name!r} is not an environment variable name")
            if name in MANAGED_ENV:
                raise sub.fail(name, f"{name!r} may not be set in a recipe: {MANAGED_ENV[name]}")
            problem = env_problem(name)
            if problem:
                raise sub.fail(name, f"{name!r} may not be set in a recipe: {problem}")
            if not isinstance(value, str):
                raise sub.fail(name, f'{name!r} must be a string (quote it: {name} = "{value}")')
            if "\0" in value:
                raise sub.fail(name, f"{name!r} holds a NUL character, which no environment value can carry")
            env[name] = value
        sub.seen.update(sub.table)
        return env

    def flags(self, key: str = "flags") -> dict[str, FlagValue]:
        sub = self.sub(key, f"{self.what} flags")
        if sub is None:
            return {}
        flags: dict[str, FlagValue] = {}
        for name, value in sub.table.items():
            if not _FLAG_NAME.fullmatch(name):
                raise sub.fail(
                    name, f"{name!r} is not a long flag: write \"--name\" = value (no '=', no spaces)"
                )
            problem = flag_problem(name, MANAGED_FLAGS)
            if problem:
                raise sub.fail(name, problem)
            if isinstance(value, list):
                if not value or not all(
                    isinstance(v, str | int | float) and not isinstance(v, bool) for v in value
                ):
                    raise sub.fail(
                        name, f"{name!r}: a list value must hold strings or numbers, got {value!r}"
                    )
                flags[name] = [str(v) for v in value]
            elif isinstance(value, str | int | float | bool):
                flags[name] = value
            else:
                raise sub.fail(name, f"{name!r}: a flag value must be a string, number, boolean or list")
            stored = flags[name]
            for element in (
                stored if isinstance(stored, list) else [stored] if isinstance(stored, str) else []
            ):
                problem = value_problem(element)
                if problem:
                    raise sub.fail(name, f"{name!r}: {problem}")
        sub.seen.update(sub.table)
        return flags

    def done(self) -> None:
        unknown = [k for k in self.table if k not in self.seen]
        if unknown:
            key = unknown[0]
            close = difflib.get_close_matches(key, sorted(self.seen), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(self.seen))})"
            raise self.fail(key, f"unknown key {key!r}{hint}")


def _serving(r: _Reader) -> ServingProfile:
    s = r.sub("serving", f"{r.what} serving")
    if s is None:
        return ServingProfile()
    kwargs = s.sub("chat_template_kwargs", f"{s.what} chat_template_kwargs")
    sampling = s.sub("sampling", f"{s.what} sampling")
    vf = known_flags()  # a parser the pinned vLLM does not register would stop the server at start
    registered = f" the parsers vLLM {vf.version} registers"
    profile = ServingProfile(
        reasoning_parser=s.text(
            "reasoning_parser", argv=True, choices=vf.reasoning_parsers, among=registered
        ),
        tool_call_parser=s.text(
            "tool_call_parser", argv=True, choices=vf.tool_call_parsers, among=registered
        ),
        chat_template_kwargs=dict(kwargs.table) if kwargs else {},
        thinking_default=s.boolean("thinking_default", default=None),
        source=s.text("source"),
    )
    if sampling is not None:
        for key in (*TOP_LEVEL_SAMPLING, *EXTRA_BODY_SAMPLING):
            if key in sampling.table:
                value = sampling.table[key]
                if key == "reasoning_effort":
                    sampling.text(key, choices=("low", "medium", "high", "max"))
                elif isinstance(value, bool) or not isinstance(value, int | float):
                    raise sampling.fail(key, f"{key!r} must be a number, got {value!r}")
                profile.sampling[key] = value
        sampling.seen.update((*TOP_LEVEL_SAMPLING, *EXTRA_BODY_SAMPLING))
        sampling.done()
    if kwargs:
        kwargs.seen.update(kwargs.table)
    s.done()
    return profile


def _defaults(r: _Reader) -> dict[str, Any]:
    sub = r.sub("defaults", f"{r.what} defaults")
    if sub is None:
        return {}
    values = {k: v for k, v in _layout(sub).items() if v is not None}
    sub.done()
    return values


def _profile(name: str, r: _Reader, origin: Origin) -> Profile:
    weights = r.number("weights_gb", 0.0, 10_000.0)
    profile = Profile(
        name=name,
        checkpoint=r.text("checkpoint", required=True, argv=True) or "",
        architecture=r.text("architecture", required=True) or "",
        quantization=r.text("quantization", required=True, choices=QUANTIZATIONS) or "",
        quantizer=r.text("quantizer", required=True, choices=QUANTIZERS) or "",
        weights_gb=weights,
        origin=origin,
        local=bool(r.boolean("local")),
        served_model_name=r.text("served_model_name", argv=True),
        publisher=r.text("publisher"),
        quant_scope=r.text("quant_scope", choices=QUANT_SCOPES) or "all",
        reasoning=bool(r.boolean("reasoning")),
        moe=bool(r.boolean("moe")),
        description=r.text("description"),
        serving=_serving(r),
        defaults=_defaults(r),
        flags=r.flags(),
        env=r.env(),
        requires_patches=r.str_list("requires_patches"),
        requires_env=_requires_env(r),
    )
    if profile.local and (profile.checkpoint.startswith("/") or ".." in Path(profile.checkpoint).parts):
        raise r.fail("checkpoint", "a local checkpoint is a directory name under the box's model_root")
    r.done()
    return profile


def _layout(r: _Reader) -> dict[str, Any]:
    """The layout keys (``LAYOUT_KEYS``) of an arm or of a profile's ``defaults``; unset keys are None."""
    vf = known_flags()
    return {
        "max_num_seqs": r.integer("max_num_seqs"),
        "max_model_len": r.integer("max_model_len", minimum=16),
        "max_num_batched_tokens": r.integer("max_num_batched_tokens"),
        "block_size": r.integer("block_size"),
        "kv_cache_dtype": r.text("kv_cache_dtype", choices=vf.flags["--kv-cache-dtype"]["choices"]),
        "dtype": r.text("dtype", choices=vf.flags["--dtype"]["choices"]),
        "enforce_eager": r.boolean("enforce_eager", default=None),
        "gpu_memory_utilization": r.number("gpu_memory_utilization", 0.05, 1.0),
    }


DEVICES = ("gpu", "cpu")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _requires_env(r: _Reader) -> dict[str, str]:
    """``requires_env = {"flashinfer-python" = ">0.6.18"}``: packages the probe reports, each a requirement that
    parses (console/recipes/requirement.py), so a typo is refused here and not on the box."""
    sub = r.sub("requires_env", f"{r.what} requires_env")
    if sub is None:
        return {}
    out: dict[str, str] = {}
    for package, text in sub.table.items():
        if package not in REPORTED:
            raise sub.fail(package, f"{package!r} is not a package the probe reports ({', '.join(REPORTED)})")
        if not isinstance(text, str):
            raise sub.fail(package, f'{package!r} must be a requirement string like ">0.6.18", got {text!r}')
        try:
            parse_requirement(package, text, "requires_env")
        except InputError as exc:
            raise sub.fail(package, exc.message) from exc
        out[package] = text
    sub.seen.update(sub.table)
    return out


def _patch(name: str, r: _Reader, origin: Origin) -> Patch:
    """``[patches.NAME]``: ``source`` (where it comes from) and either an importable ``module`` marker or a
    ``file`` under site-packages with the ``sha256`` of its patched bytes."""
    patch = Patch(
        name=name,
        source=r.text("source", required=True) or "",
        origin=origin,
        module=r.text("module"),
        file=r.text("file"),
        sha256=r.text("sha256"),
        description=r.text("description"),
    )
    if (patch.module is None) == (patch.file is None):
        raise r.fail(None, "give either module (an importable marker) or file + sha256 (a patched file)")
    if patch.module is not None and not _MODULE.match(patch.module):
        raise r.fail("module", f"{patch.module!r} is not a dotted module name")
    if patch.module is not None and patch.sha256 is not None:
        raise r.fail(
            "sha256", "sha256 goes with file, not module (a module marker's digest is recorded, not checked)"
        )
    if patch.file is not None:
        if patch.file.startswith("/") or ".." in Path(patch.file).parts or "\0" in patch.file:
            raise r.fail(
                "file", f"{patch.file!r}: give a path relative to the env's site-packages, without '..'"
            )
        if patch.sha256 is None or not _SHA256.match(patch.sha256):
            raise r.fail(
                "sha256", "a file patch needs sha256 = the 64 lower-case hex digits of the patched file"
            )
    r.done()
    return patch


def _arm(name: str, r: _Reader, origin: Origin) -> Arm:
    backends = known_flags().kernel_backends
    replicas = r._get("replicas", False)
    if replicas is not None and (isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1):
        raise r.fail(
            "replicas", f"'replicas' must be an integer >= 1 (omit it for one per card), got {replicas!r}"
        )
    arm = Arm(
        name=name,
        profile=r.text("profile", required=True) or "",
        origin=origin,
        description=r.text("description"),
        device=r.text("device", choices=DEVICES) or "gpu",
        linear_backend=r.text("linear_backend", choices=backends["linear_backend"]),
        moe_backend=r.text("moe_backend", choices=backends["moe_backend"]),
        tensor_parallel=r.integer("tensor_parallel") or 1,
        data_parallel=r.integer("data_parallel") or 1,
        expert_parallel=bool(r.boolean("expert_parallel")),
        replicas=replicas,
        **_layout(r),
        flags=r.flags(),
        env=r.env(),
        expected_findings=r.str_list("expected_findings"),
        baseline=r.text("baseline"),
        requires_patches=r.str_list("requires_patches") if "requires_patches" in r.table else None,
        requires_env=_requires_env(r),
        nodes=r.integer("nodes") or 1,
    )
    problem = arm_layout_problem(arm)
    if problem:
        raise r.fail("nodes", problem)
    unknown = [rule for rule in arm.expected_findings if rule not in RULES]
    if unknown:
        raise r.fail("expected_findings", f"unknown rule id {unknown[0]!r} (rules: {', '.join(RULES)})")
    r.done()
    return arm


ALIAS_KEYS = ("same_as", "description")
"""All an alias may write: the arm it is, and its own description (the row's figures, say)."""


@dataclass(frozen=True)
class _Alias:
    """``[arms."name"] same_as = "target"`` as read, before every layer is in and the target can be looked up."""

    name: str
    target: str
    origin: Origin
    line: int | None
    description: str | None


def _alias(name: str, r: _Reader, origin: Origin) -> _Alias:
    """An arm that is another arm under a second name: ``same_as`` and at most a description, nothing else, so
    the one configuration has one definition (a copied setting would drift from its original)."""
    target = r.text("same_as", required=True) or ""
    extra = [k for k in r.table if k not in ALIAS_KEYS]
    if extra:
        raise r.fail(
            extra[0],
            f"an alias (same_as = {target!r}) takes no settings beside description, found {extra[0]!r}; "
            f"drop it, or drop same_as and write the arm out in full",
        )
    alias = _Alias(name, target, origin, line_of(r.lines, r.path + ("same_as",)), r.text("description"))
    r.done()
    return alias


def _resolve_aliases(catalog: Catalog, aliases: dict[str, _Alias]) -> None:
    """Each alias becomes its target's arm under the alias's name (``alias_of`` set): every reader of
    ``catalog.arms`` (resolve, lint, launch, sweeps, the Arms view) then sees one configuration under both names."""
    for a in aliases.values():
        where = f"arms.{a.name}.same_as"

        def fail(message: str, a: _Alias = a, where: str = where) -> RecipeError:
            return RecipeError(a.origin.file, a.line, where, f"alias {a.name!r}: {message}")

        path, cur = [a.name], a.target
        while cur in aliases and cur not in path:
            path.append(cur)
            cur = aliases[cur].target
        if cur in path:
            raise fail(f"same_as forms a cycle {' -> '.join([*path, cur])}; point same_as at a real arm")
        if len(path) > 1:
            raise fail(
                f"same_as {a.target!r} is itself an alias (of {aliases[a.target].target!r}); "
                f"point same_as at the arm itself, {cur!r}"
            )
        target = catalog.arms.get(a.target)
        if target is None:
            close = difflib.get_close_matches(a.target, list(catalog.arms), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else " (`campaign recipe list` shows the arms)"
            raise fail(f"same_as names no arm {a.target!r}{hint}")
        catalog.arms[a.name] = replace(
            target,
            name=a.name,
            origin=a.origin,
            description=a.description or target.description,
            alias_of=target.name,
            flags=dict(target.flags),
            env=dict(target.env),
            expected_findings=list(target.expected_findings),
            requires_patches=None if target.requires_patches is None else list(target.requires_patches),
            requires_env=dict(target.requires_env),
            key_lines={},
        )


def _shape(name: str, r: _Reader) -> Shape:
    shape = Shape(
        name=name,
        input_len=r.integer("input_len") or 0,
        output_len=r.integer("output_len") or 0,
        prefix_len=r.integer("prefix_len", minimum=0) or 0,
        description=r.text("description"),
    )
    for key in ("input_len", "output_len"):
        if key not in r.table:
            raise r.fail(None, f"missing required key {key!r}")
    r.done()
    return shape


def _sweep(name: str, r: _Reader, origin: Origin) -> Sweep:
    sweep = Sweep(
        name=name,
        origin=origin,
        arms=r.str_list("arms"),
        base=r.text("base"),
        description=r.text("description"),
    )
    pairs = r._get("pairs", False) or []
    backends = known_flags().kernel_backends
    if not isinstance(pairs, list):
        raise r.fail("pairs", "'pairs' must be a list of {linear = ..., moe = ...} tables")
    for i, pair in enumerate(pairs):
        p = _Reader(
            r.file,
            r.lines,
            r.path + ("pairs",),
            f"{r.what} pair {i + 1}",
            pair if isinstance(pair, dict) else {},
        )
        if not isinstance(pair, dict):
            raise p.fail(
                None, f'each pair must be a table like {{linear = "b12x", moe = "marlin"}}, got {pair!r}'
            )
        sweep.pairs.append(
            KernelPair(
                p.text("linear", choices=backends["linear_backend"]),
                p.text("moe", choices=backends["moe_backend"]),
            )
        )
        p.done()
    if sweep.pairs and not sweep.base:
        raise r.fail("pairs", "kernel 'pairs' need a 'base' arm to apply them to")
    if not sweep.arms and not sweep.pairs:
        raise r.fail(None, "a sweep needs 'arms' or 'base' + 'pairs'")
    r.done()
    return sweep


_SECTIONS = {"profiles": "profile", "arms": "arm", "shapes": "shape", "sweeps": "sweep", "patches": "patch"}


def _toml_error(file: str, text: str, exc: tomllib.TOMLDecodeError) -> RecipeError:
    """tomllib puts the position in the message: '(at line 3, column 5)' or '(at end of document)'."""
    message = str(exc)
    m = re.search(r"\s*\(at line (\d+), column \d+\)", message)
    if m:
        line: int | None = int(m.group(1))
    elif "(at end of document)" in message:
        line = max(1, len(text.splitlines()))
    else:
        line = None
    if m:
        message = message.replace(m.group(0), "")
    return RecipeError(file, line, None, f"malformed TOML: {message.replace(' (at end of document)', '')}")


MAX_FILE_BYTES = 16 * 1024 * 1024
"""A larger recipe file is refused unread: 100,000 arms of the shipped kind fit in about 15 MiB."""
MAX_DEPTH = 32
"""Tables and arrays nested deeper are refused: the shipped recipes nest four deep, tomllib recurses per level."""


def _too_deep(data: dict[str, Any]) -> bool:
    """Whether any table or array lies more than MAX_DEPTH below the document (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _parse(path: Path, file: str) -> tuple[str, dict[str, Any]]:
    """The file's text and TOML; a file that would exhaust memory or the stack is refused first."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise RecipeError(
                file,
                None,
                None,
                f"larger than {MAX_FILE_BYTES >> 20} MiB, the limit for one recipe "
                "file; split it into several files",
            )
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError(file, None, None, f"cannot read recipe file: {exc}") from exc
    too_deep = RecipeError(
        file,
        None,
        None,
        f"tables or arrays nested more than {MAX_DEPTH} deep, the limit for a "
        "recipe (the shipped ones need four; see recipes/README.md)",
    )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(file, text, exc) from exc
    except RecursionError:
        raise too_deep from None
    if _too_deep(data):
        raise too_deep
    return text, data


def _twice(what: str, name: str, first: str, alias: bool) -> str:
    """A name defined twice in one layer; where one of the two is an alias (an arm only), it shadows the other."""
    if what == "arm" and alias:
        return (
            f"alias {name!r} shadows an arm of the same name (here and at {first}): "
            "an alias needs a name of its own; rename one or remove one"
        )
    return f"{what} {name!r} is already defined at {first}"


def _add_arm(
    name: str,
    r: _Reader,
    origin: Origin,
    catalog: Catalog,
    aliases: dict[str, _Alias],
    inner: dict[KeyPath, int],
) -> None:
    """An ``[arms]`` entry: an alias (``same_as``) waits for every layer; a full arm replaces an earlier layer's
    alias of its name, as it would replace an arm. An alias may not replace an earlier layer's real arm."""
    if "same_as" not in r.table:
        aliases.pop(name, None)
        catalog.arms[name] = _arm(name, r, origin)
        catalog.arms[name].key_lines = inner
        return
    if name in catalog.arms:  # a real arm of an earlier layer (the shipped recipes)
        raise RecipeError(
            origin.file,
            origin.line,
            f"arms.{name}",
            f"alias {name!r} shadows the arm {name!r} at {catalog.arms[name].origin}: give the "
            "alias another name, or replace that arm with a full [arms] table",
        )
    aliases[name] = _alias(name, r, origin)


def _load_file(
    path: Path, catalog: Catalog, seen_at: dict[tuple[str, str], str], aliases: dict[str, _Alias]
) -> None:
    file = display_path(path)
    text, data = _parse(path, file)
    lines = key_lines(text)
    records = by_record(lines)
    top = _Reader(file, lines, (), "recipe file", data)
    for section, what in _SECTIONS.items():
        sec = top.sub(section, section)
        if sec is None:
            continue
        for name, body in sec.table.items():
            sec.seen.add(name)
            origin = Origin(file, line_of(lines, (section, name)))
            if not isinstance(body, dict):
                raise sec.fail(name, f'{what} {name!r} must be a table ([{section}."{name}"])')
            if (section, name) in seen_at:
                twice = _twice(what, name, seen_at[section, name], "same_as" in body or name in aliases)
                raise RecipeError(file, origin.line, f"{section}.{name}", twice)
            seen_at[section, name] = str(origin)
            r = _Reader(file, lines, (section, name), f"{what} {name!r}", body)
            inner = records.get((section, name), {})
            if section == "profiles":
                catalog.profiles[name] = _profile(name, r, origin)
                catalog.profiles[name].key_lines = inner
            elif section == "arms":
                _add_arm(name, r, origin, catalog, aliases, inner)
            elif section == "shapes":
                catalog.shapes[name] = _shape(name, r)
            elif section == "patches":
                catalog.patches[name] = _patch(name, r, origin)
            else:
                catalog.sweeps[name] = _sweep(name, r, origin)
    top.done()
    catalog.files.append(path)


def _check_patch_references(catalog: Catalog) -> None:
    """Every ``requires_patches`` name is a ``[patches.NAME]`` of the catalog."""
    records: list[Profile | Arm] = [*catalog.profiles.values(), *catalog.arms.values()]
    for record in records:
        for name in record.requires_patches or []:
            if name not in catalog.patches:
                close = difflib.get_close_matches(name, list(catalog.patches), n=1)
                hint = (
                    f" (did you mean {close[0]!r}?)"
                    if close
                    else f" (patches: {', '.join(catalog.patches) or 'none'})"
                )
                kind = "profiles" if isinstance(record, Profile) else "arms"
                raise RecipeError(
                    record.origin.file,
                    record.line_of("requires_patches"),
                    f"{kind}.{record.name}.requires_patches",
                    f"{kind[:-1]} {record.name!r}: no [patches.{name}]{hint}",
                )


def _check_references(catalog: Catalog) -> None:
    _check_patch_references(catalog)
    for arm in catalog.arms.values():
        if arm.profile not in catalog.profiles:
            close = difflib.get_close_matches(arm.profile, list(catalog.profiles), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise RecipeError(
                arm.origin.file,
                arm.line_of("profile"),
                f"arms.{arm.name}.profile",
                f"arm {arm.name!r}: no profile named {arm.profile!r}{hint}",
            )
        if arm.baseline is not None and arm.baseline not in catalog.arms:
            raise RecipeError(
                arm.origin.file,
                arm.line_of("baseline"),
                f"arms.{arm.name}.baseline",
                f"arm {arm.name!r}: no arm named {arm.baseline!r} to be its baseline",
            )
    for sweep in catalog.sweeps.values():
        for name in [*sweep.arms, *([sweep.base] if sweep.base else [])]:
            if name not in catalog.arms:
                raise RecipeError(
                    sweep.origin.file,
                    sweep.origin.line,
                    f"sweeps.{sweep.name}",
                    f"sweep {sweep.name!r}: no arm named {name!r}",
                )


def _recipe_files(paths: Iterable[Path | str]) -> list[Path]:
    files: list[Path] = []
    for entry in paths:
        path = Path(entry)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.toml") if p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            raise RecipeError(
                display_path(path),
                None,
                None,
                "no such recipe file or directory; give .toml files or "
                "folders (default: the shipped recipes), or see one arm with `campaign recipe show ARM`",
            )
    return files


def _layers() -> list[list[Path]]:
    """The shipped recipe files, then the operator's; a user file at the same relative path replaces the shipped one."""
    shipped = shipped_recipe_dir()
    user = user_recipe_dir()
    if user is None:
        return [_recipe_files([shipped])]
    mine = _recipe_files([user])
    replaced = {p.relative_to(user) for p in mine}
    return [[p for p in _recipe_files([shipped]) if p.relative_to(shipped) not in replaced], mine]


def load_catalog(paths: Iterable[Path | str] | None = None) -> Catalog:
    """Load recipe files (directories are searched for ``*.toml``); default: the shipped recipes, the user's on top.

    A name is defined once within a layer; a user's profile, arm, shape or sweep replaces a shipped one of the
    same name.
    """
    layers = _layers() if paths is None else [_recipe_files(paths)]
    if not any(layers):
        raise RecipeError(
            ", ".join(str(p) for p in (paths or [shipped_recipe_dir()])),
            None,
            None,
            "no *.toml recipe files found",
        )
    catalog = Catalog()
    aliases: dict[str, _Alias] = {}
    for files in layers:
        seen_at: dict[tuple[str, str], str] = {}
        for path in files:
            _load_file(path, catalog, seen_at, aliases)
    _resolve_aliases(catalog, aliases)
    _check_references(catalog)
    return catalog
