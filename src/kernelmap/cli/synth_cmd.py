"""CLI: `kernelmap synth` writes a synthetic GGUF of a circuit's architecture and quantizes it with llama.cpp."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["register"]


def _preset_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


@click.command("synth")
@click.option("--arch", default=None, help="GGUF architecture (a circuit's), e.g. the one --dims names.")
@click.option("--dims", required=True, help="Dims of a named real model (synth/dims.json) or `tiny`.")
@click.option("-o", "--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The F16 source model; presets go beside it as STEM-PRESET.gguf.")
@click.option("--preset", "presets_", default="", help="Comma-separated presets to quantize to (F16, Q8_0, Q4_0, Q4_K_M).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--vocab", "vocab_file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="A GGUF whose tokenizer to copy (default: the dims' vocabulary file in --vocab-dir).")
@click.option("--vocab-dir", default=None, help="llama.cpp's models/ folder of ggml-vocab-*.gguf ($KERNELMAP_VOCAB_DIR).")
@click.option("--peer-python", default=None, help="Python of llama-cpp-python, for quantizing ($KERNELMAP_PEER_PYTHON).")
@click.option("-t", "--threads", type=int, default=1, show_default=True, help="Quantizer threads.")
def synth_command(arch: str | None, dims: str, out: Path, presets_: str, seed: int, vocab_file: Path | None,
                  vocab_dir: str | None, peer_python: str | None, threads: int) -> None:
    """Write a GGUF with seeded random weights at the dims of a real model (or tiny), a real tokenizer, and presets.

    The tokenizer is copied from llama.cpp's vocab-only GGUFs (tiny dims keep the first tokens only);
    presets are made by llama.cpp's own quantizer in the peer's Python. Prints the files written.

    Example: kernelmap synth --arch qwen2 --dims tiny -o q.gguf --preset Q8_0,Q4_K_M --vocab-dir llama.cpp/models
    """
    from kernelmap.synth import peer_python as find_peer
    from kernelmap.synth import presets as preset_table
    from kernelmap.synth import quantize, read_tokenizer, resolve_dims, vocab_path, write_model

    arch_name, spec = resolve_dims(arch, dims)
    wanted = _preset_list(presets_)
    table = preset_table()
    for p in wanted:  # refuse a bad preset before writing anything
        if p not in table:
            from kernelmap.errors import ModelError

            raise ModelError("unknown preset", pointer="--preset", value=p, expected=sorted(table))
    source = vocab_file or vocab_path(spec["vocab_name"], vocab_dir)
    tokenizer = read_tokenizer(source, keep=spec.get("vocab_keep"))
    python = find_peer(peer_python) if any(not table[p].get("source") for p in wanted) else None
    path = write_model(out, arch_name, spec, tokenizer, seed=seed, name=f"synthetic {dims}")
    click.echo(str(path))
    for p in wanted:
        if table[p].get("source"):
            continue
        target = out.with_name(f"{out.stem}-{p}{out.suffix}")
        quantize(path, target, p, python=python, threads=threads)  # type: ignore[arg-type]
        click.echo(str(target))


def register(cli: click.Group) -> None:
    """Add `synth` to the CLI."""
    cli.add_command(synth_command)
