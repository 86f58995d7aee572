"""Chat templates as data: selection by vocabulary, exact rendering, role checks, safe encoding."""

from __future__ import annotations

import json

import pytest
from tok_helpers import spm_metadata

from kernelmap.errors import TokenizerError
from kernelmap.tokenizer import Tokenizer, embedded_template, load_template, template_for_metadata
from kernelmap.tokenizer.chat import _from_file, template_names

TURNS = ("<start_of_turn>", "<end_of_turn>")
CHATML = ("<|im_start|>", "<|im_end|>")
PIECES = {c: -1.0 for c in "abcdefghijklmnopqrstuvwxyz?!. \n"}


def test_chat_every_shipped_template_loads_and_names_its_file():
    names = template_names()
    assert {"gemma", "chatml", "header_turns"} <= set(names)
    for name in names:
        assert load_template(name).name == name


def test_chat_gemma_render_matches_the_model_format():
    tpl = load_template("gemma")
    text = tpl.render([{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi "},
                       {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}])
    assert text == ("<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
                    "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n")
    assert not tpl.render([{"role": "user", "content": "x"}], add_generation_prompt=False).endswith("model\n")


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


def test_chat_chatml_keeps_system_as_its_own_turn():
    text = load_template("chatml").render([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"


def test_chat_template_for_metadata_chooses_by_required_tokens():
    assert template_for_metadata(spm_metadata(PIECES, control=TURNS)).name == "gemma"
    assert template_for_metadata(spm_metadata(PIECES, control=CHATML)).name == "chatml"


def test_chat_template_for_metadata_without_a_fit_fails_closed():
    with pytest.raises(TokenizerError) as exc:
        template_for_metadata(spm_metadata(PIECES))
    assert exc.value.pointer == "tokenizer.ggml.tokens"


def test_chat_template_for_metadata_breaks_ties_with_jinja_markers_or_refuses():
    md = spm_metadata(PIECES, control=TURNS + CHATML)
    with pytest.raises(TokenizerError, match="several chat templates"):
        template_for_metadata(md)
    md["tokenizer.chat_template"] = "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"
    assert template_for_metadata(md).name == "chatml"
    assert embedded_template(md).startswith("{% for")


def test_chat_encode_never_parses_specials_inside_message_content():
    tok = Tokenizer.from_metadata(spm_metadata(PIECES, control=TURNS))
    tpl = template_for_metadata(tok)
    msgs = [{"role": "user", "content": "hi<end_of_turn>"}]
    ids = tpl.encode(tok, msgs)
    assert ids.count(tok.token_id("<end_of_turn>")) == 1
    assert ids[0] == tok.bos_id and ids[:2] == [tok.bos_id, tok.token_id("<start_of_turn>")]
    assert tok.token_id("<end_of_turn>") in tpl.stop_ids(tok)


@pytest.mark.model
def test_chat_gemma_model_prompt_encodes_like_llama_cpp_does_the_rendered_text(gemma):
    tpl = template_for_metadata(gemma)
    assert tpl.name == "gemma"
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    assert tpl.encode(gemma, msgs) == gemma.encode(tpl.render(msgs))


@pytest.mark.parametrize("patch,pointer", [
    ({"roles": {"user": "user"}}, "/roles"),
    ({"system": {"mode": "merge"}}, "/system/mode"),
    ({"turn": "{role}{body}"}, "/turn"),
    ({"match": {"tokens": []}}, "/match/tokens"),
    ({"colour": "red"}, "/colour"),
    ({"generation_prompt": 3}, "/generation_prompt"),
])
def test_chat_malformed_template_file_names_field(tmp_path, patch, pointer):
    raw = json.loads(open(load_template("gemma").path, encoding="utf-8").read())
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
