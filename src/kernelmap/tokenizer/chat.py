"""Chat templates as data: templates/*.json + a list of messages -> prompt text (or token ids).

A template file declares the tokens a vocabulary must have for it to apply, its role names, how a
system message is placed, and the turn and generation-prompt strings. The GGUF's own Jinja template
(`tokenizer.chat_template`) can be shown with `embedded_template` but is never executed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kernelmap.errors import TokenizerError, closest

__all__ = ["ChatTemplate", "load_template", "template_names", "template_for_metadata", "embedded_template"]

_DIR = Path(__file__).resolve().parent / "templates"
_SYSTEM_MODES = ("turn", "prefix_first_user", "reject")
_TEMPLATE_KEY = "tokenizer.chat_template"
_MAX_SHOWN = 1 << 20


def _parts(text: str, where: str, path: str) -> tuple[tuple[bool, str], ...]:
    """Split a turn string into (is_hole, text) parts; holes are {role} and {content} only."""
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
        if name not in ("role", "content"):
            raise TokenizerError("unknown hole in turn string", path=path, pointer=where,
                                 value=rest[at:at + 20], expected="{role}, {content}")
        out.append((True, name))
        rest = rest[end + 1:]
    return tuple(out)


@dataclass(frozen=True)
class ChatTemplate:
    """One chat format, loaded from templates/<name>.json."""

    name: str
    path: str
    requires_tokens: tuple[str, ...]
    jinja_markers: tuple[str, ...]
    roles: Mapping[str, str]
    system_mode: str
    system_separator: str
    trim_content: bool
    alternate: bool
    prefix: str
    turn: tuple[tuple[bool, str], ...]
    generation_prompt: str
    stop_tokens: tuple[str, ...]

    def render(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True) -> str:
        """The prompt text for `messages` ({"role", "content"} mappings); BOS is the tokenizer's job."""
        return "".join(text for text, _ in self.segments(messages, add_generation_prompt))

    def segments(self, messages: Sequence[Mapping[str, Any]],
                 add_generation_prompt: bool = True) -> list[tuple[str, bool]]:
        """The prompt as (text, is_user_content) pieces, so content can be encoded without specials."""
        msgs = self._check(messages)
        system = None
        if msgs and msgs[0][0] == "system" and self.system_mode != "turn":
            if self.system_mode == "reject":
                raise TokenizerError("this template has no system role", path=self.path,
                                     pointer="messages/0/role", value="system")
            system = msgs[0][1]
            msgs = msgs[1:]
        if self.alternate:
            for i, (role, _) in enumerate(msgs):
                want = "user" if i % 2 == 0 else "assistant"
                if role != want and role != "system":
                    raise TokenizerError("roles must alternate user/assistant starting with user",
                                         path=self.path, pointer=f"messages/{i}/role", value=role,
                                         expected=want)
        out: list[tuple[str, bool]] = [(self.prefix, False)] if self.prefix else []
        for i, (role, content) in enumerate(msgs):
            label = self.roles[role]
            if self.trim_content:
                content = content.strip()
            for is_hole, text in self.turn:
                if not is_hole:
                    out.append((text, False))
                elif text == "role":
                    out.append((label, False))
                else:
                    if system is not None and i == 0:
                        out.append((system, True))
                        out.append((self.system_separator, False))
                    out.append((content, True))
        if add_generation_prompt:
            out.append((self.generation_prompt, False))
        return [(t, c) for t, c in out if t]

    def encode(self, tokenizer: Any, messages: Sequence[Mapping[str, Any]],
               add_generation_prompt: bool = True) -> list[int]:
        """Token ids of the prompt: template text parses special tokens, message content never does."""
        ids: list[int] = tokenizer.encode("", add_bos=None)
        for text, is_content in self.segments(messages, add_generation_prompt):
            ids += tokenizer.encode(text, add_bos=False, parse_special=not is_content)
        return ids

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
        allowed = sorted({*self.roles, "system"})
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping):
                raise TokenizerError("message is not a mapping", path=self.path, pointer=f"messages/{i}",
                                     value=type(m).__name__, expected="{role, content}")
            role, content = m.get("role"), m.get("content")
            if role not in allowed or (role == "system" and i != 0):
                near = closest(str(role), allowed)
                raise TokenizerError("unknown or misplaced role", path=self.path, pointer=f"messages/{i}/role",
                                     value=role, expected=allowed if role != "system" else "system first only",
                                     hint=f"closest: {near}" if near and near != role else None)
            if not isinstance(content, str):
                raise TokenizerError("content is not a string", path=self.path,
                                     pointer=f"messages/{i}/content", value=type(content).__name__)
            out.append((role, content))
        return out


def _field(raw: Mapping[str, Any], key: str, kind: type, path: str, default: Any = ...) -> Any:
    if key not in raw:
        if default is ...:
            raise TokenizerError("missing field", path=path, pointer=f"/{key}")
        return default
    value = raw[key]
    if not isinstance(value, kind) or (kind is list and not all(isinstance(x, str) for x in value)):
        raise TokenizerError("wrong field type", path=path, pointer=f"/{key}", value=value,
                             expected=kind.__name__ if kind is not list else "list of strings")
    return value


def _from_file(path: Path) -> ChatTemplate:
    where = str(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TokenizerError(f"cannot read chat template ({exc})", path=where) from None
    if not isinstance(raw, dict):
        raise TokenizerError("chat template is not a JSON object", path=where, pointer="/")
    known = {"name", "about", "match", "roles", "system", "trim_content", "alternate", "prefix", "turn",
             "generation_prompt", "stop_tokens"}
    for key in raw:
        if key not in known:
            raise TokenizerError("unknown field", path=where, pointer=f"/{key}", value=key, expected=sorted(known),
                                 hint=f"closest: {closest(key, sorted(known))}" if closest(key, sorted(known))
                                 else None)
    match = _field(raw, "match", dict, where)
    roles = _field(raw, "roles", dict, where)
    if set(roles) != {"user", "assistant"} or not all(isinstance(v, str) and v for v in roles.values()):
        raise TokenizerError("roles must map exactly user and assistant to labels", path=where,
                             pointer="/roles", value=sorted(roles))
    system = _field(raw, "system", dict, where)
    mode = system.get("mode")
    if mode not in _SYSTEM_MODES:
        raise TokenizerError("unknown system mode", path=where, pointer="/system/mode", value=mode,
                             expected=_SYSTEM_MODES)
    if mode == "turn":
        label = system.get("label")
        if not isinstance(label, str) or not label:
            raise TokenizerError("system turn needs a label", path=where, pointer="/system/label", value=label)
        roles = {**roles, "system": label}
    separator = system.get("separator", "")
    if not isinstance(separator, str):
        raise TokenizerError("wrong field type", path=where, pointer="/system/separator", value=separator,
                             expected="str")
    requires = match.get("tokens", [])
    markers = match.get("jinja_markers", [])
    for key, value in (("tokens", requires), ("jinja_markers", markers)):
        if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
            raise TokenizerError("wrong field type", path=where, pointer=f"/match/{key}", value=value,
                                 expected="list of non-empty strings")
    if not requires:
        raise TokenizerError("a template must require at least one token", path=where, pointer="/match/tokens")
    turn = _field(raw, "turn", str, where)
    return ChatTemplate(
        name=_field(raw, "name", str, where), path=where, requires_tokens=tuple(requires),
        jinja_markers=tuple(markers), roles=roles, system_mode=mode, system_separator=separator,
        trim_content=_field(raw, "trim_content", bool, where, False),
        alternate=_field(raw, "alternate", bool, where, False), prefix=_field(raw, "prefix", str, where, ""),
        turn=_parts(turn, "/turn", where), generation_prompt=_field(raw, "generation_prompt", str, where),
        stop_tokens=tuple(_field(raw, "stop_tokens", list, where, [])))


def template_names() -> list[str]:
    """Names of the shipped templates (file stems under templates/)."""
    return sorted(p.stem for p in _DIR.glob("*.json"))


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


def template_for_metadata(md: Any) -> ChatTemplate:
    """The one shipped template whose required tokens the vocabulary has (GGUF metadata or Tokenizer).

    If several match and the GGUF carries a Jinja template, its markers break the tie; a remaining
    tie or no match at all is a TokenizerError (never a silent default).
    """
    have, jinja, source = _vocab_facts(md)
    fits = [t for t in map(load_template, template_names()) if all(tok in have for tok in t.requires_tokens)]
    if len(fits) > 1 and jinja is not None:
        marked = [t for t in fits if t.jinja_markers and all(m in jinja for m in t.jinja_markers)]
        fits = marked or fits
    if len(fits) > 1:
        most = max(len(t.requires_tokens) for t in fits)
        fits = [t for t in fits if len(t.requires_tokens) == most]
    if len(fits) == 1:
        return fits[0]
    if not fits:
        raise TokenizerError("no chat template fits this vocabulary", path=source, pointer="tokenizer.ggml.tokens",
                             expected=template_names(),
                             hint="add a templates/*.json whose match.tokens this model has")
    raise TokenizerError("several chat templates fit this vocabulary", path=source,
                         pointer="tokenizer.ggml.tokens", value=[t.name for t in fits],
                         hint="make one template's match.tokens more specific")


def embedded_template(md: Any) -> str | None:
    """The GGUF's own Jinja chat template text, for display only (capped at 1 MiB); never rendered."""
    vocab = getattr(md, "vocab", None)
    text = vocab.chat_template if vocab is not None else (md.get(_TEMPLATE_KEY) if isinstance(md, Mapping)
                                                          else None)
    if not isinstance(text, str):
        return None
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN]
