"""Chat templates as data: templates/*.json + a list of messages -> prompt text (or token ids).

A template file gives, per role, the text around a message's content, which roles are trimmed, an
optional opening text for turns (the [INST] families), how a system message is placed and the
generation prompt. Which template a GGUF needs is decided from its embedded Jinja template
(`tokenizer.chat_template`) by the ordered substring rules of templates/detect.json, the way
llama.cpp's llama_chat_apply_template recognises a family; the Jinja text itself is never
executed. A GGUF without one (a base model) gets the template whose base_model_tokens its
vocabulary has, and the choice says so (`TemplateChoice.note`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kernelmap.errors import TokenizerError, closest

__all__ = ["ChatTemplate", "TemplateChoice", "load_template", "template_names", "template_for_metadata",
           "choose_template", "detect_family", "embedded_template"]

_DIR = Path(__file__).resolve().parent / "templates"
_DETECT = _DIR / "detect.json"
_TEMPLATE_KEY = "tokenizer.chat_template"
_MAX_SHOWN = 1 << 20
_ROLES = ("system", "user", "assistant")
_C_SPACE = " \t\n\v\f\r"  # what llama.cpp's trim() removes (C isspace), not Unicode whitespace


def _holes(text: str, where: str, path: str, allowed: tuple[str, ...]) -> tuple[tuple[bool, str], ...]:
    """Split a format string into (is_hole, text) parts; holes are the names in `allowed`."""
    out: list[tuple[bool, str]] = []
    rest = text
    while rest:
        at = rest.find("{")
        if at == -1:
            out.append((False, rest))
            break
        if at:
            out.append((False, rest[:at]))
        end = rest.find("}", at)
        name = rest[at + 1:end] if end != -1 else ""
        if name not in allowed:
            raise TokenizerError("unknown hole in format string", path=path, pointer=where,
                                 value=rest[at:at + 20], expected=", ".join("{" + a + "}" for a in allowed))
        out.append((True, name))
        rest = rest[end + 1:]
    return tuple(out)


@dataclass(frozen=True)
class ChatTemplate:
    """One chat format, loaded from templates/<name>.json."""

    name: str
    path: str
    formats: Mapping[str, tuple[tuple[bool, str], ...]]
    system_merge: str | None
    trim: frozenset[str]
    prefix: str
    open_text: str
    open_at_start: bool
    close_after: frozenset[str]
    alternate: bool
    generation_prompt: str
    stop_tokens: tuple[str, ...]
    base_model_tokens: tuple[str, ...]

    def render(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True) -> str:
        """The prompt text for `messages` ({"role", "content"} mappings); BOS is the tokenizer's job."""
        return "".join(text for text, _ in self.segments(messages, add_generation_prompt))

    def segments(self, messages: Sequence[Mapping[str, Any]],
                 add_generation_prompt: bool = True) -> list[tuple[str, bool]]:
        """The prompt as (text, is_message_content) pieces, so content can be encoded without specials."""
        msgs = self._check(messages)
        out: list[tuple[str, bool]] = [(self.prefix, False)]
        inside = self.open_at_start
        pending = ""
        for role, content in msgs:
            if role in self.trim:
                content = content.strip(_C_SPACE)
            if role == "system" and self.system_merge is not None:
                pending += content
                continue
            if not inside:
                out.append((self.open_text, False))
                inside = True
            for is_hole, text in self.formats[role]:
                if not is_hole:
                    out.append((text, False))
                elif text == "content":
                    out.append((content, True))
                elif pending:
                    out.append((pending, True))
                    out.append((self.system_merge or "", False))
                    pending = ""
            if role in self.close_after:
                inside = False
        if add_generation_prompt:
            out.append((self.generation_prompt, False))
        return [(t, c) for t, c in out if t]

    def encode(self, tokenizer: Any, messages: Sequence[Mapping[str, Any]],
               add_generation_prompt: bool = True) -> list[int]:
        """Token ids of the prompt, as llama.cpp tokenizes the rendered text (BOS per the model, special
        tokens parsed), except that special-token text inside message content stays plain text."""
        return tokenizer.encode_segments(self.segments(messages, add_generation_prompt))

    def stop_ids(self, tokenizer: Any) -> tuple[int, ...]:
        """Ids of this template's stop tokens plus the tokenizer's end-of-turn ids."""
        found = {tokenizer.token_id(t) for t in self.stop_tokens}
        found.discard(None)
        return tuple(sorted(found | set(tokenizer.eot_ids)))

    def _check(self, messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise TokenizerError("messages must be a list of {role, content}", path=self.path,
                                 pointer="messages", value=type(messages).__name__)
        out = []
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping):
                raise TokenizerError("message is not a mapping", path=self.path, pointer=f"messages/{i}",
                                     value=type(m).__name__, expected="{role, content}")
            role, content = m.get("role"), m.get("content")
            if role not in _ROLES or (role == "system" and i != 0):
                near = closest(str(role), list(_ROLES))
                raise TokenizerError("unknown or misplaced role", path=self.path, pointer=f"messages/{i}/role",
                                     value=role, expected=list(_ROLES) if role != "system" else "system first only",
                                     hint=f"closest: {near}" if near and near != role else None)
            if not isinstance(content, str):
                raise TokenizerError("content is not a string", path=self.path,
                                     pointer=f"messages/{i}/content", value=type(content).__name__)
            out.append((role, content))
        if self.alternate:
            turns = out[1:] if out and out[0][0] == "system" else out
            for i, (role, _) in enumerate(turns):
                want = "user" if i % 2 == 0 else "assistant"
                if role != want:
                    at = i + len(out) - len(turns)
                    raise TokenizerError("roles must alternate user/assistant starting with user",
                                         path=self.path, pointer=f"messages/{at}/role", value=role, expected=want)
        return out


def _field(raw: Mapping[str, Any], key: str, kind: type, path: str, default: Any = ...) -> Any:
    if key not in raw:
        if default is ...:
            raise TokenizerError("missing field", path=path, pointer=f"/{key}")
        return default
    value = raw[key]
    if not isinstance(value, kind) or (kind is list and not all(isinstance(x, str) and x for x in value)):
        raise TokenizerError("wrong field type", path=path, pointer=f"/{key}", value=value,
                             expected=kind.__name__ if kind is not list else "list of non-empty strings")
    return value


_KNOWN = {"name", "about", "formats", "system_merge", "trim", "prefix", "open", "close_after", "alternate",
          "generation_prompt", "stop_tokens", "base_model_tokens"}


def _from_file(path: Path) -> ChatTemplate:
    where = str(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TokenizerError(f"cannot read chat template ({exc})", path=where) from None
    if not isinstance(raw, dict):
        raise TokenizerError("chat template is not a JSON object", path=where, pointer="/")
    for key in raw:
        if key not in _KNOWN:
            near = closest(key, sorted(_KNOWN))
            raise TokenizerError("unknown field", path=where, pointer=f"/{key}", value=key, expected=sorted(_KNOWN),
                                 hint=f"closest: {near}" if near else None)
    merge = _field(raw, "system_merge", str, where, None)
    fmts = _field(raw, "formats", dict, where)
    need = {"user", "assistant"} if merge is not None else set(_ROLES)
    if set(fmts) != need:
        raise TokenizerError("formats must give exactly these roles", path=where, pointer="/formats",
                             value=sorted(fmts), expected=sorted(need))
    formats = {}
    for role, text in fmts.items():
        if not isinstance(text, str) or "{content}" not in text:
            raise TokenizerError("a role format must be a string with a {content} hole", path=where,
                                 pointer=f"/formats/{role}", value=text)
        allowed = ("content", "system") if merge is not None and role == "user" else ("content",)
        formats[role] = _holes(text, f"/formats/{role}", where, allowed)
    if merge is not None and not any(h and t == "system" for h, t in formats["user"]):
        raise TokenizerError("system_merge needs a {system} hole in the user format", path=where,
                             pointer="/formats/user")
    opening = _field(raw, "open", dict, where, {"text": "", "at_start": True})
    if set(opening) != {"text", "at_start"} or not isinstance(opening["text"], str) \
            or not isinstance(opening["at_start"], bool):
        raise TokenizerError("open must be {text: string, at_start: bool}", path=where, pointer="/open", value=opening)
    roles = set(_ROLES)
    for key in ("trim", "close_after"):
        bad = [r for r in _field(raw, key, list, where, []) if r not in roles]
        if bad:
            raise TokenizerError("unknown role", path=where, pointer=f"/{key}", value=bad, expected=sorted(roles))
    return ChatTemplate(
        name=_field(raw, "name", str, where), path=where, formats=formats, system_merge=merge,
        trim=frozenset(_field(raw, "trim", list, where, [])), prefix=_field(raw, "prefix", str, where, ""),
        open_text=opening["text"], open_at_start=opening["at_start"],
        close_after=frozenset(_field(raw, "close_after", list, where, [])),
        alternate=_field(raw, "alternate", bool, where, False),
        generation_prompt=_field(raw, "generation_prompt", str, where),
        stop_tokens=tuple(_field(raw, "stop_tokens", list, where, [])),
        base_model_tokens=tuple(_field(raw, "base_model_tokens", list, where, [])))


def template_names() -> list[str]:
    """Names of the shipped templates (file stems under templates/, detect.json excluded)."""
    return sorted(p.stem for p in _DIR.glob("*.json") if p != _DETECT)


@cache
def load_template(name: str) -> ChatTemplate:
    """Load templates/<name>.json; an unknown name is a TokenizerError with the closest name."""
    names = template_names()
    if name not in names:
        near = closest(name, names)
        raise TokenizerError("unknown chat template", path=str(_DIR), pointer="name", value=name,
                             expected=names, hint=f"closest: {near}" if near else None)
    tpl = _from_file(_DIR / f"{name}.json")
    if tpl.name != name:
        raise TokenizerError("template name differs from its file name", path=tpl.path, pointer="/name",
                             value=tpl.name, expected=name)
    return tpl


@cache
def _rules() -> dict[str, Any]:
    where = str(_DETECT)
    try:
        doc = json.loads(_DETECT.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TokenizerError(f"cannot read template rules ({exc})", path=where) from None
    names = set(template_names())
    for i, rule in enumerate(doc["rules"]):
        tpl = rule.get("template")
        if tpl is not None and tpl not in names:
            raise TokenizerError("rule names a template that does not exist", path=where,
                                 pointer=f"/rules/{i}/template", value=tpl, expected=sorted(names))
    for name, tpl in doc["names"].items():
        if tpl is not None and tpl not in names:
            raise TokenizerError("name maps to a template that does not exist", path=where,
                                 pointer=f"/names/{name}", value=tpl, expected=sorted(names))
    return doc


def _hit(text: str, alt: Any) -> bool:
    if isinstance(alt, str):
        return alt in text
    return text.startswith(alt["starts_with"])


def detect_family(jinja: str) -> tuple[str, str | None]:
    """(family name, shipped template name or None) for a Jinja chat template text or a family name,
    by the first detect.json rule whose every group has a hit; ("unknown", None) if none does."""
    doc = _rules()
    if jinja in doc["names"]:
        return jinja, doc["names"][jinja]
    for rule in doc["rules"]:
        if all(any(_hit(jinja, alt) for alt in group) for group in rule["all_of"]):
            return rule["family"], rule.get("template")
    return "unknown", None


@dataclass(frozen=True)
class TemplateChoice:
    """The template for a model and how it was chosen ("named", "embedded" or "assumed")."""

    template: ChatTemplate
    how: str
    family: str
    note: str | None = None


def _vocab_facts(md: Any) -> tuple[set[str] | Mapping[str, int], str | None, str]:
    vocab = getattr(md, "vocab", None)
    if vocab is not None:
        return vocab.token_to_id, vocab.chat_template, vocab.source
    tokens = md.get("tokenizer.ggml.tokens") if isinstance(md, Mapping) else None
    if tokens is None:
        raise TokenizerError("missing metadata key", pointer="tokenizer.ggml.tokens",
                             hint="pass GGUF metadata or a Tokenizer")
    items = tokens.tolist() if hasattr(tokens, "tolist") else list(tokens)
    jinja = md.get(_TEMPLATE_KEY)
    return set(items), jinja if isinstance(jinja, str) else None, "<metadata>"


def choose_template(md: Any, name: str | None = None) -> TemplateChoice:
    """The chat template for GGUF metadata or a Tokenizer: `name` if given, else the family the
    embedded Jinja template belongs to, else (a base model) the one template whose base_model_tokens
    the vocabulary has. A recognised but unsupported family, or no fit, is a TokenizerError."""
    have, jinja, source = _vocab_facts(md)
    if name is not None:
        return TemplateChoice(load_template(name), "named", name)
    supported = template_names()
    if jinja is not None:
        family, tpl = detect_family(jinja)
        if tpl is None and family == "unknown":
            raise TokenizerError("chat template of no family llama.cpp recognises", path=source,
                                 pointer=_TEMPLATE_KEY, expected=supported, hint="choose one with --template NAME")
        if tpl is None:
            raise TokenizerError("unsupported chat template family", path=source, pointer=_TEMPLATE_KEY,
                                 value=family, expected=supported, hint="choose one with --template NAME")
        return TemplateChoice(load_template(tpl), "embedded", family)
    fits = [t for t in map(load_template, supported)
            if t.base_model_tokens and all(tok in have for tok in t.base_model_tokens)]
    if len(fits) > 1:
        most = max(len(t.base_model_tokens) for t in fits)
        fits = [t for t in fits if len(t.base_model_tokens) == most]
    if len(fits) != 1:
        raise TokenizerError("no chat template in the file and none fits its vocabulary" if not fits else
                             "no chat template in the file and several fit its vocabulary", path=source,
                             pointer=_TEMPLATE_KEY, value=[t.name for t in fits] or None, expected=supported,
                             hint="a base model; choose a template with --template NAME")
    tpl = fits[0]
    note = (f"{source}: no chat template in the file (a base model, not tuned for chat); "
            f"assuming the {tpl.name} template from its vocabulary")
    return TemplateChoice(tpl, "assumed", tpl.name, note)


def template_for_metadata(md: Any) -> ChatTemplate:
    """The chat template `choose_template` picks (GGUF metadata or a Tokenizer)."""
    return choose_template(md).template


def embedded_template(md: Any) -> str | None:
    """The GGUF's own Jinja chat template text, for display only (capped at 1 MiB); never rendered."""
    vocab = getattr(md, "vocab", None)
    text = vocab.chat_template if vocab is not None else (md.get(_TEMPLATE_KEY) if isinstance(md, Mapping)
                                                          else None)
    if not isinstance(text, str):
        return None
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN]
