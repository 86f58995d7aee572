"""`kernelmap tokenize -m FILE -p TEXT [--chat] [--json]`: show how a model's tokenizer splits text.

Input: a GGUF (its tokenizer metadata) and text, or with --chat the text as one user message in
the model's chat template. Output: ids and pieces on stdout (one JSON object with --json). It does
not load weights or run the model.
"""

from __future__ import annotations

import json

import click

from kernelmap.cli.text_input import arg_text, stdin_text

__all__ = ["register"]


def _show(piece: bytes) -> str:
    text = piece.decode("utf-8", errors="backslashreplace")
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


@click.command("tokenize")
@click.option("-m", "--model", type=click.Path(dir_okay=False, exists=True), default=None,
              help="GGUF file (default: the default model package's file).")
@click.option("-p", "--prompt", default=None, help="Text to tokenize (default: read stdin).")
@click.option("--chat", is_flag=True, help="Wrap the text as a user turn in the model's chat template.")
@click.option("--template", "template_name", default=None,
              help="With --chat: the chat template name (default: the family of the GGUF's own template).")
@click.option("--no-bos", is_flag=True, help="Do not add BOS/EOS even if the model asks for them.")
@click.option("--no-special", is_flag=True, help="Treat control-token text (e.g. <bos>) as plain text.")
@click.option("--json", "json_out", is_flag=True, help="Print one JSON object on stdout.")
def tokenize_command(model: str | None, prompt: str | None, chat: bool, template_name: str | None, no_bos: bool,
                     no_special: bool, json_out: bool) -> None:
    """Tokenize text with a GGUF model's own tokenizer and show ids and pieces.

    Example: kernelmap tokenize -m gemma-3-270m-q4_k_m.gguf -p "Hello world" --json
    """
    from kernelmap.gguf import open_gguf
    from kernelmap.tokenizer import Tokenizer, choose_template

    if model is None:
        from kernelmap.runtime import default_model_path  # the package is named in runtime/default_model.json

        model = str(default_model_path())
    path = model
    f = open_gguf(path)
    tok = Tokenizer.from_metadata(f.metadata, source=path)
    text = arg_text(prompt, "--prompt", "text") if prompt is not None else stdin_text()
    template = None
    if chat:
        choice = choose_template(tok, template_name)
        if choice.note:
            click.echo(f"note: {choice.note}", err=True)
        template = choice.template
        messages = [{"role": "user", "content": text}]
        ids = template.encode(tok, messages)
        text = template.render(messages)
    else:
        ids = tok.encode(text, add_bos=False if no_bos else None, parse_special=not no_special)
    pieces = [tok.token_to_piece(i, special=True) for i in ids]
    if json_out:
        doc = {"schema": "kernelmap.tokenize/1", "model": path, "template": template.name if template else None,
               "n_tokens": len(ids), "ids": ids, "pieces": [p.decode("utf-8", errors="replace") for p in pieces]}
        click.echo(json.dumps(doc, ensure_ascii=False))
        return
    for i, p in zip(ids, pieces, strict=True):
        click.echo(f"{i:>7}  {_show(p)}")
    click.echo(f"{len(ids)} tokens", err=True)


def register(cli: click.Group) -> None:
    """Add `tokenize` to the CLI group."""
    cli.add_command(tokenize_command)
