"""CLI commands that compile and run models: `run`, `chat` and `compile` (standalone C bundle).

They parse flags in llama.cpp's habits (-m -p -n -t -c, --temp --top-k --top-p --min-p --seed), show
progress on stderr while compiling (a bar with counts per long step), stream generated text to stdout
and print speed on stderr.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kernelmap.cli.text_input import arg_text, file_text, stdin_line
from kernelmap.compiler import DEFAULT_PREFILL_ROWS, CompileOptions
from kernelmap.errors import ModelError, TargetError
from kernelmap.runtime.model import DEFAULT_CTX, MAX_THREADS

__all__ = ["register"]


# KV cache types as llama.cpp spells them (-ctk/-ctv) -> the policy that reproduces llama.cpp with that cache
# (flash attention on, 1 thread; llama-cpu-kvq8 also on N threads: ggml never splits a q8_0 cache's keys)
CACHE_POLICIES = {"f16": "llama-cpu", "q8_0": "llama-cpu-kvq8"}
DEFAULT_POLICY = "llama-cpu"


def cache_policy(policy: str | None, cache_k: str | None, cache_v: str | None) -> str:
    """The numerics policy for --policy and --cache-type-k/-v. No cache flag: --policy (default llama-cpu).
    A cache flag (the other one defaults to f16, llama.cpp's default): K and V must be one supported type;
    without --policy it picks CACHE_POLICIES[type]; with --policy that policy's KV cache must be that type."""
    if cache_k is None and cache_v is None:
        return policy or DEFAULT_POLICY
    k, v = cache_k or "f16", cache_v or "f16"
    for opt, value in (("--cache-type-k", k), ("--cache-type-v", v)):
        if value not in CACHE_POLICIES:
            raise ModelError("unsupported KV cache type", pointer=opt, value=value, expected=sorted(CACHE_POLICIES))
    if k != v:
        raise ModelError("K and V cache types differ; only equal pairs are supported", pointer="--cache-type-v",
                         value=v, expected=k)
    if policy is None:
        return CACHE_POLICIES[k]
    from kernelmap.numerics import load_policy

    kv = load_policy(policy).rule_for("attention").kv
    if kv != k:
        raise ModelError(f"policy {policy} keeps its KV cache in {kv}", pointer="--cache-type-k", value=k, expected=kv,
                         hint=f"drop --policy (then {CACHE_POLICIES[k]} is used) or pass a policy with a {k} cache")
    return policy


_cache_opts = [
    click.option("-ctk", "--cache-type-k", "cache_k", default=None,
                 help=f"KV cache type of K: {' or '.join(CACHE_POLICIES)} (as llama.cpp; give -ctv the same). "
                      f"Picks the policy unless --policy is given: " +
                      ", ".join(f"{t} -> {p}" for t, p in CACHE_POLICIES.items()) + "."),
    click.option("-ctv", "--cache-type-v", "cache_v", default=None,
                 help="KV cache type of V (the same as -ctk)."),
]


def _options(policy: str, maps: tuple[str, ...], isa: str | None, batch: int, profile: bool = False) -> CompileOptions:
    from kernelmap.target import parse_isa, target_features

    features = None
    if isa:
        try:
            features = target_features() if isa == "host" else parse_isa(isa)
        except TargetError as exc:
            if exc.pointer != "KERNELMAP_ISA" or isa == "host":
                raise
            raise TargetError(exc.message, pointer="--isa", value=exc.value, expected=exc.expected,
                              hint=exc.hint) from None
    if batch < 1 or batch > 4096:
        raise ModelError("prefill batch out of range", pointer="--batch", value=batch, expected="1..4096")
    return CompileOptions(policy=policy, maps=tuple(maps), isa=features, max_rows=batch, profile=profile)


class _Progress:
    """Compile progress on stderr (rich): a spinner naming the current step and, for each long step, a
    bar with counts (kernel units compiled or reused, the model unit, tensors packed). When something
    was built, one summary line stays: what was counted and how long it took."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.tasks: dict[str, Any] = {}
        if quiet:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
                        Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = Console(stderr=True)
        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                            TextColumn("{task.fields[counts]}"), TimeElapsedColumn(), console=self.console,
                            transient=True)
        self.status = self.bar.add_task("starting", total=None, counts="")
        self.t0 = time.perf_counter()
        self.bar.start()

    def say(self, msg: str) -> None:
        """A step starts."""
        if not self.quiet:
            self.bar.update(self.status, description=f"[bold]compiling[/bold]: {msg}")

    def count(self, step: str, done: int, total: int) -> None:
        """Counts of a long step (a bar per step)."""
        if self.quiet or total <= 0:
            return
        task = self.tasks.get(step)
        if task is None:
            task = self.tasks[step] = self.bar.add_task(step, total=total, counts="")
        self.bar.update(task, completed=done, total=total, counts=f"{done}/{total}")

    def stop(self) -> None:
        if self.quiet:
            return
        self.bar.stop()
        built = [(step, self.bar.tasks[task]) for step, task in self.tasks.items()]
        if any(t.completed for _, t in built):
            parts = ", ".join(f"{step} {int(t.completed)}/{int(t.total or 0)}" for step, t in built)
            self.console.print(f"built in {time.perf_counter() - self.t0:.1f} s: {parts}", highlight=False)


def _load(model: str | None, threads: int | None, ctx: int | None, options: CompileOptions, quiet: bool) -> Any:
    from kernelmap.runtime import load

    progress = _Progress(quiet)
    try:
        return load(model, threads=threads, n_ctx=ctx, options=options, progress=progress.say,
                    counter=progress.count)
    finally:
        progress.stop()


# Seeds: any integer NumPy's PCG64 takes that the server takes too (its `seed` is reduced modulo 2**64).
MAX_SEED = 2**64 - 1


def _seed(ctx: click.Context, param: click.Parameter, value: int) -> int:
    if value != -1 and not 0 <= value <= MAX_SEED:
        raise click.BadParameter(f"{value} is not in the range 0..{MAX_SEED} (or -1: a random seed)", ctx, param)
    return value


def _resolve_seed(seed: int, quiet: bool) -> int:
    """llama.cpp's --seed -1: a random seed, printed on stderr (unless -q) so the run can be repeated with it."""
    if seed != -1:
        return seed
    import secrets

    seed = secrets.randbelow(MAX_SEED + 1)
    if not quiet:
        print(f"seed: {seed} (--seed -1)", file=sys.stderr)
    return seed


_threads_opt = click.option("-t", "--threads", type=click.IntRange(1, MAX_THREADS), default=None,
                            help=f"Threads (default: the physical cores this process may use; at most {MAX_THREADS}, "
                                 "llama.cpp's cap).")
_model_opt = click.option("-m", "--model", type=click.Path(dir_okay=False), default=None,
                          help="GGUF model file (default: the default model package).")
_common = [
    _threads_opt,
    click.option("-c", "--ctx", "--ctx-size", "ctx", type=click.IntRange(min=1), default=None,
                 help=f"KV cache capacity in tokens (default: {DEFAULT_CTX}, or the model's trained context when "
                      "shorter)."),
    click.option("--policy", default=None, help="Numerics policy name or file (default: llama-cpu, or the one "
                 "-ctk/-ctv pick)."),
    *_cache_opts,
    click.option("--maps", multiple=True, type=click.Path(file_okay=False), help="Extra kernel-map directory."),
    click.option("--isa", default=None, help="Target ISA (e.g. avx2 or avx2,fma,f16c); default: this CPU."),
    click.option("-ub", "--ubatch-size", "--batch", "batch", type=int, default=DEFAULT_PREFILL_ROWS, show_default=True,
                 help="Prefill rows per step (as llama.cpp's -ub)."),
    click.option("-q", "--quiet", is_flag=True, help="No progress or speed lines on stderr."),
]
_sampling = [
    click.option("--temp", type=float, default=0.0, show_default=True, help="Temperature (0 = greedy)."),
    click.option("--top-k", type=int, default=40, show_default=True),
    click.option("--top-p", type=float, default=1.0, show_default=True),
    click.option("--min-p", type=float, default=0.0, show_default=True),
    click.option("--repeat-penalty", type=float, default=1.0, show_default=True),
    click.option("--repeat-last-n", type=click.IntRange(min=-1), default=64, show_default=True,
                 help="Tokens the repeat penalty looks back over (0: none, -1: the whole context, as llama.cpp)."),
    click.option("--seed", type=int, default=0, show_default=True, callback=_seed,
                 help=f"Random seed of sampling, 0..{MAX_SEED} (-1: a random one, printed on stderr)."),
]


def _apply(opts: list[Any]) -> Callable[[Any], Any]:
    def deco(f: Any) -> Any:
        for opt in reversed(opts):
            f = opt(f)
        return f
    return deco


def _sampler(temp: float, top_k: int, top_p: float, min_p: float, repeat_penalty: float, repeat_last_n: int,
             seed: int) -> Any:
    """The sampler, checked before anything is compiled; --repeat-last-n -1 (the whole context) is set by _window
    once the context is known."""
    from kernelmap.runtime import SamplerConfig

    return SamplerConfig(temperature=temp, top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty,
                         repeat_last_n=max(repeat_last_n, 0), seed=seed).check()


def _window(sampler: Any, m: Any, repeat_last_n: int) -> Any:
    """--repeat-last-n -1: the model's context length (llama.cpp's reading of -1)."""
    from dataclasses import replace

    return replace(sampler, repeat_last_n=m.n_ctx) if repeat_last_n == -1 else sampler


def _fits(m: Any, ids: list[int], where: str, ctx: int | None, what: str, hint: str) -> None:
    """Refuse `ids` (of `what`, from `where`) when empty or longer than the model's context."""
    if not ids:
        raise ModelError(f"{what} is empty (no tokens)", path=where)
    if len(ids) > m.n_ctx:
        size = (f"--ctx {m.n_ctx}" if ctx is not None
                else f"the default --ctx ({DEFAULT_CTX}, or the model's trained context when shorter)")
        raise ModelError(f"{what} has more tokens than the context holds", path=where, value=len(ids),
                         expected=f"at most {m.n_ctx}, set by {size}", hint=hint)


def _limit(m: Any, n_predict: int) -> int:
    """-n as a token count: -1 (llama.cpp's "infinity") is the context's length, more than a generation can
    reach (it stops at a stop token or when the context is full)."""
    return m.n_ctx if n_predict == -1 else n_predict


def _prompt_ids(m: Any, prompt: str, where: str, ctx: int | None) -> list[int]:
    """The prompt's token ids, refused when they do not fit the context."""
    ids = m.tokenizer.encode(prompt)
    _fits(m, ids, where, ctx, "prompt", "use a larger --ctx or a shorter prompt")
    return ids


@click.command("run")
@_model_opt
@click.option("-p", "--prompt", default=None, help="Prompt text.")
@click.option("-f", "--file", "prompt_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Read the prompt from a file.")
@click.option("-n", "--n-predict", type=click.IntRange(min=-1), default=128, show_default=True,
              help="Tokens to generate (-1: until a stop token or a full context, as llama.cpp's -1).")
@_apply(_common)
@_apply(_sampling)
@click.option("--json", "json_out", is_flag=True, help="Print one JSON object (text, tokens, stats) on stdout.")
def run_command(model: str | None, prompt: str | None, prompt_file: str | None, n_predict: int, threads: int | None,
                ctx: int | None, policy: str | None, cache_k: str | None, cache_v: str | None, maps: tuple[str, ...],
                isa: str | None, batch: int, quiet: bool, temp: float,
                top_k: int, top_p: float, min_p: float, repeat_penalty: float, repeat_last_n: int, seed: int,
                json_out: bool) -> None:
    """Compile a GGUF model (cached) and generate text from a prompt.

    Example: kernelmap run -m gemma-3-270m-q4_k_m.gguf -p "The capital of France is" -n 32 -t 2
    """
    prompt = file_text(prompt_file) if prompt_file else arg_text(prompt, "--prompt")
    if prompt is None:
        raise ModelError("no prompt given", pointer="--prompt", hint='pass -p "text" or -f FILE')
    sampler = _sampler(temp, top_k, top_p, min_p, repeat_penalty, repeat_last_n, _resolve_seed(seed, quiet))
    m = _load(model, threads, ctx, _options(cache_policy(policy, cache_k, cache_v), maps, isa, batch), quiet)
    with m:
        # tokenized and checked against the context before anything reaches stdout
        ids = _prompt_ids(m, prompt, prompt_file or "--prompt", ctx)
        out = (lambda _t: None) if json_out else (lambda t: (sys.stdout.write(t), sys.stdout.flush()))
        if not json_out:
            sys.stdout.write(prompt)
        text, stats = m.generate(ids, _limit(m, n_predict), _window(sampler, m, repeat_last_n), on_text=out)
        if json_out:
            print(json.dumps({"prompt": prompt, "text": text, "tokens": stats.tokens,
                              "prompt_tokens": stats.prompt_tokens, "generated_tokens": stats.generated_tokens,
                              "prefill_tokens_per_s": stats.prefill_tps, "decode_tokens_per_s": stats.decode_tps,
                              "stop_reason": stats.stop_reason, "threads": m.threads}))
        else:
            sys.stdout.write("\n")
        if not quiet:
            print(f"prompt: {stats.prompt_tokens} tokens, {stats.prefill_tps:.1f} tokens/s | "
                  f"generated: {stats.generated_tokens} tokens, {stats.decode_tps:.1f} tokens/s "
                  f"({m.threads} threads, stop: {stats.stop_reason})", file=sys.stderr)


@click.command("chat")
@_model_opt
@click.option("-n", "--n-predict", type=click.IntRange(min=-1), default=256, show_default=True,
              help="Max tokens per reply (-1: until a stop token or a full context).")
@click.option("--system", default=None, help="System prompt (if the template supports one).")
@click.option("--template", "template_name", default=None,
              help="Chat template name (default: the family of the GGUF's own template).")
@_apply(_common)
@_apply(_sampling)
def chat_command(model: str | None, n_predict: int, system: str | None, template_name: str | None,
                 threads: int | None, ctx: int | None, policy: str | None, cache_k: str | None, cache_v: str | None,
                 maps: tuple[str, ...], isa: str | None, batch: int, quiet: bool, temp: float, top_k: int, top_p: float, min_p: float, repeat_penalty: float,
                 repeat_last_n: int, seed: int) -> None:
    """Chat with a model using its chat template (one line per user turn; Ctrl-D ends).

    Example: kernelmap chat -m gemma-3-270m-q4_k_m.gguf --temp 0.7 --seed 1
    """
    from kernelmap.gguf import open_gguf
    from kernelmap.runtime import default_model_path
    from kernelmap.tokenizer import Tokenizer, choose_template

    system = arg_text(system, "--system", "system prompt")
    sampler = _sampler(temp, top_k, top_p, min_p, repeat_penalty, repeat_last_n, _resolve_seed(seed, quiet))
    policy = cache_policy(policy, cache_k, cache_v)
    path = model or str(default_model_path())
    choice = choose_template(Tokenizer.from_metadata(open_gguf(path).metadata, source=path), template_name)
    if choice.note:  # before compiling, so a template problem shows at once
        print(f"note: {choice.note}", file=sys.stderr)
    m = _load(path, threads, ctx, _options(policy, maps, isa, batch), quiet)
    m.chat_template = choice.template
    messages: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
    tty = sys.stdin.isatty()
    number = 0
    with m:
        while True:
            if tty:
                sys.stderr.write("> ")
                sys.stderr.flush()
            number += 1
            line = stdin_line(number)
            if line is None:
                break
            if not line.strip():
                continue
            messages.append({"role": "user", "content": line.rstrip("\n")})
            ids = m.chat_template.encode(m.tokenizer, messages)
            _fits(m, ids, f"stdin line {number}", ctx, "the conversation", "use a larger --ctx, or start a new chat")
            stop = m.chat_template.stop_ids(m.tokenizer)
            text, stats = m.generate(ids, _limit(m, n_predict), _window(sampler, m, repeat_last_n), stop=stop,
                                     on_text=lambda t: (sys.stdout.write(t), sys.stdout.flush()))
            sys.stdout.write("\n")
            sys.stdout.flush()
            messages.append({"role": "assistant", "content": text})
            if not quiet:
                print(f"[{stats.generated_tokens} tokens, {stats.decode_tps:.1f} tokens/s]", file=sys.stderr)


@click.command("compile")
@_model_opt
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Directory for the standalone bundle (C sources, Makefile, weights, manifest): new, empty, or a "
                   "previous bundle (replaced); anything else is refused, and so is the directory you run from (or one "
                   "holding it).")
@click.option("--policy", default=None, help="Numerics policy name or file (default: llama-cpu, or the one -ctk/-ctv "
              "pick).")
@_apply(_cache_opts)
@click.option("--maps", multiple=True, type=click.Path(file_okay=False))
@click.option("--isa", default=None, help="Target ISA (default: this CPU).")
@click.option("--target", "target_spec", default=None,
              help="Target CPU class, also another machine's: aarch64[,dotprod,i8mm,sve] or x86_64_v3, ... "
                   "(features and C compiler; $CC overrides the compiler).")
@click.option("-ub", "--ubatch-size", "--batch", "batch", type=int, default=DEFAULT_PREFILL_ROWS, show_default=True,
              help="Prefill rows per step (as llama.cpp's -ub).")
@click.option("--profile", is_flag=True, help="Build with per-op timing.")
@click.option("-q", "--quiet", is_flag=True)
def compile_command(model: str | None, out_dir: str, policy: str | None, cache_k: str | None, cache_v: str | None,
                    maps: tuple[str, ...], isa: str | None, target_spec: str | None, batch: int, profile: bool,
                    quiet: bool) -> None:
    """Compile a GGUF model and write a self-contained C bundle that builds with `make`.

    Example: kernelmap compile -m gemma-3-270m-q4_k_m.gguf -o gemma-bundle && make -C gemma-bundle
    Cross build: kernelmap compile --target aarch64,dotprod -o arm-bundle && make -C arm-bundle
    """
    import contextlib

    from kernelmap.codegen.bundle import check_out_dir, write_bundle
    from kernelmap.compiler import compile_model
    from kernelmap.runtime import default_model_path
    from kernelmap.target import parse_target

    if isa and target_spec:
        raise ModelError("give either --isa or --target, not both", pointer="--target", value=target_spec)
    target = parse_target(target_spec) if target_spec else None
    options = _options(cache_policy(policy, cache_k, cache_v), maps, isa, batch, profile)
    if target is not None:
        options = dataclasses.replace(options, isa=target.features)
    gguf = Path(model) if model else default_model_path()
    check_out_dir(Path(out_dir), gguf)  # refuse a directory in the way before compiling (write_bundle checks again)
    progress = _Progress(quiet)
    try:
        with target.compiler_env() if target is not None else contextlib.nullcontext():
            compiled = compile_model(gguf, options, progress=progress.say, counter=progress.count)
        progress.say("writing bundle")
        path = write_bundle(compiled, Path(out_dir))
    finally:
        progress.stop()
    if target is not None and not quiet:
        print(f"target {target.spec}: class {target.cls}, compiler {target.cc}", file=sys.stderr)
    mem = compiled.info["memory"]
    print(str(path))
    if not quiet:
        for phase, m in sorted(mem.items()):
            print(f"{phase}: {m['summary']}", file=sys.stderr)


def register(cli: click.Group) -> None:
    """Add run, chat and compile to the CLI."""
    cli.add_command(run_command)
    cli.add_command(chat_command)
    cli.add_command(compile_command)
