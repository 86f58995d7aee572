"""Chat templates as data: rendering equals llama.cpp's llama_chat_apply_template, family detection
from the GGUF's Jinja text in llama.cpp's order, base-model notice, role checks, safe encoding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tok_helpers import spm_metadata

from kernelmap.errors import TokenizerError
from kernelmap.tokenizer import (
    Tokenizer,
    choose_template,
    detect_family,
    embedded_template,
    load_template,
    template_for_metadata,
)
from kernelmap.tokenizer.chat import _from_file, template_names

CHAT = json.loads((Path(__file__).resolve().parent.parent / "fixtures" / "tokenizer" / "chat_llama_cpp.json")
                  .read_text(encoding="utf-8"))
CONVS = CHAT["conversations"]
TURNS = ("<start_of_turn>", "<end_of_turn>")
CHATML = ("<|im_start|>", "<|im_end|>")
PIECES = {c: -1.0 for c in "abcdefghijklmnopqrstuvwxyz?!. \n"}


def _renders(key: str) -> list[tuple[str, bool, str | None]]:
    out = []
    for k, text in CHAT["templates"][key]["renders"].items():
        conv, flag = k.split(",add_ass=")
        out.append((conv, flag == "1", text))
    return out


def test_chat_every_shipped_template_loads_and_llama_cpp_knows_its_name():
    names = template_names()
    assert {"gemma", "chatml", "llama3", "phi3", "llama2", "mistral-v7", "command-r"} <= set(names)
    for name in names:
        assert load_template(name).name == name
        assert f"name:{name}" in CHAT["templates"], f"no llama.cpp rendering recorded for {name}"


@pytest.mark.parametrize("name", template_names())
def test_chat_template_renders_every_conversation_as_llama_cpp_does(name):
    tpl = load_template(name)
    for conv, add_ass, want in _renders(f"name:{name}"):
        assert want is not None
        assert tpl.render(CONVS[conv], add_ass) == want, f"{name} {conv} add_generation_prompt={add_ass}"


_DETECT = [k for k in CHAT["templates"] if not k.startswith("name:")]


@pytest.mark.parametrize("key", _DETECT)
def test_chat_family_detection_from_jinja_follows_llama_cpp(key):
    jinja = CHAT["templates"][key]["template"]
    family, name = detect_family(jinja)
    renders = _renders(key)
    if renders[0][2] is None:  # llama.cpp does not recognise it either
        assert (family, name) == ("unknown", None), key
        return
    assert family != "unknown", key
    if name is None:  # recognised, not shipped: refused by name
        with pytest.raises(TokenizerError, match=family):
            choose_template({"tokenizer.ggml.tokens": ["a"], "tokenizer.chat_template": jinja})
        return
    tpl = load_template(name)
    for conv, add_ass, want in renders:
        assert tpl.render(CONVS[conv], add_ass) == want, f"{key} -> {name} {conv} {add_ass}"


def test_chat_unsupported_family_error_names_it_and_the_supported_ones():
    jinja = CHAT["templates"]["jinja:phi4-style"]["template"]
    with pytest.raises(TokenizerError) as exc:
        choose_template({"tokenizer.ggml.tokens": ["a"], "tokenizer.chat_template": jinja})
    msg = str(exc.value)
    assert exc.value.pointer == "tokenizer.chat_template" and "phi4" in msg and "chatml" in msg and "--template" in msg


def test_chat_gemma_rejects_roles_out_of_turn():
    tpl = load_template("gemma")
    with pytest.raises(TokenizerError) as exc:
        tpl.render([{"role": "assistant", "content": "hi"}])
    assert exc.value.pointer == "messages/0/role"


def test_chat_unknown_role_names_message_and_closest():
    with pytest.raises(TokenizerError) as exc:
        load_template("chatml").render([{"role": "usr", "content": "hi"}])
    assert exc.value.pointer == "messages/0/role"
    assert "closest: user" in str(exc.value)


def test_chat_trim_removes_only_ascii_whitespace_like_llama_cpp():
    text = load_template("llama3").render([{"role": "user", "content": "\u00a0 hi \x1c\n"}], False)
    assert text == "<|start_header_id|>user<|end_header_id|>\n\n\u00a0 hi \x1c<|eot_id|>"


def test_chat_base_model_gets_assumed_template_with_a_one_line_note():
    choice = choose_template(spm_metadata(PIECES, control=TURNS))
    assert choice.template.name == "gemma" and choice.how == "assumed"
    assert "base model" in choice.note and "gemma" in choice.note and "\n" not in choice.note
    assert template_for_metadata(spm_metadata(PIECES, control=CHATML)).name == "chatml"


def test_chat_base_model_without_a_fitting_template_fails_closed():
    with pytest.raises(TokenizerError) as exc:
        template_for_metadata(spm_metadata(PIECES))
    assert exc.value.pointer == "tokenizer.chat_template" and "--template" in str(exc.value)


def test_chat_embedded_template_decides_over_vocabulary_tokens():
    md = spm_metadata(PIECES, control=TURNS + CHATML)
    with pytest.raises(TokenizerError, match="several"):
        template_for_metadata(md)
    md["tokenizer.chat_template"] = "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"
    choice = choose_template(md)
    assert choice.template.name == "chatml" and choice.how == "embedded" and choice.note is None
    assert embedded_template(md).startswith("{% for")
    assert choose_template(md, "gemma").template.name == "gemma"


def test_chat_encode_never_parses_specials_inside_message_content():
    tok = Tokenizer.from_metadata(spm_metadata(PIECES, control=TURNS))
    tpl = template_for_metadata(tok)
    msgs = [{"role": "user", "content": "hi<end_of_turn>"}]
    ids = tpl.encode(tok, msgs)
    assert ids.count(tok.token_id("<end_of_turn>")) == 1
    assert ids[0] == tok.bos_id and ids[:2] == [tok.bos_id, tok.token_id("<start_of_turn>")]
    assert tok.token_id("<end_of_turn>") in tpl.stop_ids(tok)


@pytest.mark.model
def test_chat_default_model_is_a_base_model_and_gets_the_gemma_notice(gemma):
    choice = choose_template(gemma)
    assert choice.how == "assumed" and choice.template.name == "gemma" and "base model" in choice.note


@pytest.mark.model
def test_chat_gemma_model_prompt_encodes_like_llama_cpp_does_the_rendered_text(gemma):
    tpl = template_for_metadata(gemma)
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    assert tpl.encode(gemma, msgs) == gemma.encode(tpl.render(msgs))


@pytest.mark.parametrize("patch,pointer", [
    ({"formats": {"user": "{content}"}}, "/formats"),
    ({"formats": {"user": "{body}", "assistant": "{content}"}}, "/formats/user"),
    ({"formats": {"user": "<u>{content}", "assistant": "{content}"}}, "/formats/user"),
    ({"trim": ["narrator"]}, "/trim"),
    ({"open": {"text": 1}}, "/open"),
    ({"colour": "red"}, "/colour"),
    ({"generation_prompt": 3}, "/generation_prompt"),
])
def test_chat_malformed_template_file_names_field(tmp_path, patch, pointer):
    raw = json.loads(Path(load_template("gemma").path).read_text(encoding="utf-8"))
    raw.update(patch)
    path = tmp_path / "gemma.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(TokenizerError) as exc:
        _from_file(path)
    assert exc.value.pointer == pointer
    assert exc.value.path == str(path)


def test_chat_unknown_template_name_suggests_closest():
    with pytest.raises(TokenizerError, match="closest: gemma"):
        load_template("gemmma")
