"""Bad command-line input as a user meets it: exit 1 with one line (or click's usage error, exit 2), no traceback,
and nothing on stdout when the input was refused before generation.

Covers text that is not UTF-8 (arguments, files, stdin), JSON nested too deeply, option values out of range
(--seed, --grace, --host, --threads, -n), checks made before the prompt is echoed (context fit, tokenizer
metadata) and errors that name the option the user gave (--isa, --ctx and its default). The real `kernelmap`
process runs on a tiny synthetic model (trained context 256).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from synth_model import write_synth_model

import gguf
from kernelmap.compiler import CompileOptions, compile_model
from kernelmap.errors import ModelError, TokenizerError
from kernelmap.runtime.model import Model

DEEP = "[" * 2000  # Python's JSON decoder recursed once per level: RecursionError past ~1000
DEEP_LINE = "/: not valid JSON: nested too deeply (found 2000; expected at most 200 levels)"
SEED_MAX = 2**64 - 1
MAX_THREADS = 512  # runtime/model.py's MAX_THREADS: llama.cpp's cap


def _kernelmap(*args: str | bytes, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """Run the CLI with byte arguments allowed (an argument that is not UTF-8 reaches it surrogate-escaped)."""
    cmd = [sys.executable.encode(), b"-m", b"kernelmap", *(a if isinstance(a, bytes) else a.encode() for a in args)]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(errors="replace"),
                                       proc.stderr.decode(errors="replace"))


def _user_error(proc: subprocess.CompletedProcess, line: str, hint: str | None = None) -> None:
    """Exit 1, exactly `line` (and `hint`) on stderr, nothing on stdout."""
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    want = f"error: {line}\n" + (f"hint: {hint}\n" if hint else "")
    assert proc.stderr.endswith(want), proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def _usage_error(proc: subprocess.CompletedProcess, line: str) -> None:
    """Exit 2 (click's usage error), its last line exactly `line`, nothing on stdout."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.strip().splitlines()[-1] == line, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    return write_synth_model(tmp_path_factory.mktemp("cli_input") / "synth.gguf")


@pytest.fixture(scope="module")
def compiled(synth):
    return compile_model(synth, CompileOptions(max_rows=8))  # the build of `kernelmap run -ub 8`


def _run(synth: Path, *args: str | bytes, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return _kernelmap("run", "-m", str(synth), "-ub", "8", "-t", "1", "-q", *args, stdin=stdin)


# ---- 1. text that is not UTF-8 ----

def test_run_prompt_file_not_utf8_names_the_file_and_byte(synth, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"the \xff\xfe cat")
    _user_error(_run(synth, "-f", str(bad), "-n", "2"), f"{bad}: prompt is not valid UTF-8 (byte 4: invalid start byte)")


def test_run_prompt_argument_not_utf8_names_the_option(synth):
    _user_error(_run(synth, "-p", b"\xff\xfe", "-n", "2"), "--prompt: prompt is not valid UTF-8 (byte 0: invalid start byte)")


def test_tokenize_stdin_and_argument_not_utf8(synth):
    _user_error(_kernelmap("tokenize", "-m", str(synth), stdin=b"ok \xff bad"),
                "stdin: text is not valid UTF-8 (byte 3: invalid start byte)")
    _user_error(_kernelmap("tokenize", "-m", str(synth), "-p", b"a\xc3"),
                "--prompt: text is not valid UTF-8 (byte 1: unexpected end of data)")


def test_chat_stdin_line_not_utf8_names_the_line(synth):
    _user_error(_kernelmap("chat", "-m", str(synth), "-ub", "8", "-t", "1", "-n", "2", "-q", stdin=b"\xff\xfe hi\n"),
                "stdin line 1: input is not valid UTF-8 (byte 0: invalid start byte)")


def test_tokenizer_refuses_a_str_with_lone_surrogates(compiled):
    with Model(compiled, n_ctx=16, threads=1) as m:
        with pytest.raises(TokenizerError) as info:
            m.tokenizer.encode("the \udcff")
    assert info.value.pointer == "encode"
    assert info.value.value == "lone surrogate U+DCFF at character 4"


# ---- 2. JSON nested too deeply ----

def test_deep_json_is_one_line_in_every_loader(synth, tmp_path):
    maps = tmp_path / "maps"
    maps.mkdir()
    (maps / "deep.json").write_text(DEEP)
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    _user_error(_kernelmap("maps", "validate", "--maps", str(maps)), f"{maps / 'deep.json'}: {DEEP_LINE}")
    _user_error(_kernelmap("resolve", "--op", "argmax", "--phase", "decode", "--maps", str(maps)),
                f"{maps / 'deep.json'}: {DEEP_LINE}")
    _user_error(_kernelmap("explain", str(deep)), f"{deep}: {DEEP_LINE}")
    _user_error(_kernelmap("maps", "audit", "--check", "--baseline", str(deep)), f"{deep}: {DEEP_LINE}")
    _user_error(_run(synth, "-p", "the cat", "-n", "1", "--policy", str(deep)), f"{deep}: {DEEP_LINE}")


def test_parse_json_depth_limit_counts_brackets_outside_strings_only():
    from kernelmap.errors import MapError
    from kernelmap.maps.loader import MAX_JSON_DEPTH, parse_json

    ok = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert parse_json(ok.encode(), "ok.json") is not None
    assert parse_json(('["' + "[{" * 500 + '"]').encode(), "s.json") == ["[{" * 500]
    with pytest.raises(MapError) as info:
        parse_json(("[" + ok + "]").encode(), "deep.json")
    assert (info.value.value, info.value.expected) == (MAX_JSON_DEPTH + 1, f"at most {MAX_JSON_DEPTH} levels")


# ---- 3. option values that crashed ----

def test_seed_out_of_range_is_a_usage_error(synth):
    _usage_error(_run(synth, "-p", "the cat", "-n", "2", "--seed", "-2"),
                 f"Error: Invalid value for '--seed': -2 is not in the range 0..{SEED_MAX} (or -1: a random seed)")
    _usage_error(_kernelmap("chat", "-m", str(synth), "--seed", str(SEED_MAX + 1), "--temp", "0.5"),
                 f"Error: Invalid value for '--seed': {SEED_MAX + 1} is not in the range 0..{SEED_MAX} (or -1: a "
                 "random seed)")


def test_seed_minus_one_is_a_random_seed_printed_for_a_repeat(synth):
    """llama.cpp's --seed -1: a random seed, printed on stderr; the same run with that seed gives the same text."""
    first = _kernelmap("run", "-m", str(synth), "-ub", "8", "-t", "1", "-p", "the cat", "-n", "8", "-c", "64",
                       "--temp", "0.9", "--seed", "-1", "--json")  # not -q: the seed line is on stderr
    assert first.returncode == 0, first.stderr
    seed = int(re.search(r"^seed: (\d+) \(--seed -1\)$", first.stderr, re.M).group(1))
    assert 0 <= seed <= SEED_MAX
    again = _run(synth, "-p", "the cat", "-n", "8", "-c", "64", "--temp", "0.9", "--seed", str(seed), "--json")
    assert json.loads(again.stdout)["tokens"] == json.loads(first.stdout)["tokens"]
    quiet = _run(synth, "-p", "the cat", "-n", "1", "-c", "64", "--seed", "-1")  # _run passes -q
    assert quiet.returncode == 0 and "seed:" not in quiet.stderr


def test_largest_seed_samples(synth):
    proc = _run(synth, "-p", "the cat", "-n", "2", "-c", "64", "--temp", "0.5", "--seed", str(SEED_MAX))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("the cat")


@pytest.mark.parametrize("grace", ["nan", "inf", "-1"])
def test_serve_grace_not_finite_or_negative_is_a_usage_error(synth, grace):
    _usage_error(_kernelmap("serve", "-m", str(synth), "--port", "18777", "--grace", grace, "-q"),
                 f"Error: Invalid value for '--grace': {float(grace)} is not in the range 0..86400 (seconds)")


def test_serve_unresolvable_host_is_named_before_compiling(synth):
    proc = _kernelmap("serve", "-m", str(synth), "--port", "18777", "--host", "no such host!", "-q")
    assert proc.returncode == 1, proc.stderr
    assert re.fullmatch(r'error: --host: cannot listen on this address: [^()\n]+ \(found "no such host!"; expected an '
                        r"IP address or a resolvable host name\)\nhint: --host 127.0.0.1 or 0.0.0.0\n", proc.stderr), \
        proc.stderr
    assert proc.stdout == ""


def test_serve_port_in_use_is_named_before_compiling(synth):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _kernelmap("serve", "-m", str(synth), "--port", str(port), "-q")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == (f"error: --port: cannot listen on this port: Address already in use (found {port})\n"
                           "hint: another server is using it: pick another --port\n")
    assert proc.stdout == ""


# ---- 4. --threads bound ----

@pytest.mark.parametrize("command", ["run", "serve"])
def test_threads_above_the_cap_is_a_usage_error(synth, command):
    args = ["-p", "the cat", "-n", "1"] if command == "run" else []
    _usage_error(_kernelmap(command, "-m", str(synth), "-t", "100000", "-q", *args),
                 f"Error: Invalid value for '-t' / '--threads': 100000 is not in the range 1<=x<={MAX_THREADS}.")


def test_model_refuses_threads_above_the_cap(compiled):
    with pytest.raises(ModelError) as info:
        Model(compiled, n_ctx=16, threads=MAX_THREADS + 1)
    assert info.value.line() == f"--threads: thread count out of range (found {MAX_THREADS + 1}; expected 1..{MAX_THREADS})"


# ---- 5. nothing on stdout before the input is validated ----

def test_negative_n_predict_is_a_usage_error(synth):
    _usage_error(_run(synth, "-p", "the cat", "-n", "-5"),
                 "Error: Invalid value for '-n' / '--n-predict': -5 is not in the range x>=-1.")


def test_prompt_longer_than_the_context_is_refused_before_the_echo(synth, tmp_path):
    long = tmp_path / "long.txt"
    long.write_text(" ".join(["the cat sat on the mat"] * 20))
    _user_error(_run(synth, "-f", str(long), "-n", "4", "-c", "16"),
                f"{long}: prompt has more tokens than the context holds (found 360; expected at most 16, set by "
                "--ctx 16)", "use a larger --ctx or a shorter prompt")


def test_tokenizer_error_comes_before_the_echo(tmp_path, monkeypatch):
    # a gpt2 tokenizer whose merges are malformed: they are parsed when the prompt is first encoded
    add_model = gguf.GGUFWriter.add_tokenizer_model

    def gpt2(self, model: str) -> None:
        add_model(self, "gpt2")
        self.add_token_merges(["abc"])

    monkeypatch.setattr(gguf.GGUFWriter, "add_tokenizer_model", gpt2)
    bad = write_synth_model(tmp_path / "badmerge.gguf")
    monkeypatch.undo()
    _user_error(_run(bad, "-p", "the cat", "-n", "2"),
                f'{bad}: tokenizer.ggml.merges/0: merge is not two pieces separated by a space (found "abc")')


# ---- 6. the option the user gave is the one named ----

def test_unknown_isa_names_the_option_not_the_environment(synth):
    line = ("--isa: unknown ISA level or feature 'bogus' (found \"bogus\"; expected a level (scalar, avx2, avx512, "
            "avx512vnni, neon, dotprod) or feature names)")
    hint = "feature names use the Linux /proc/cpuinfo spelling, e.g. avx2,fma,f16c"
    _user_error(_run(synth, "-p", "the cat", "--isa", "bogus"), line, hint)
    _user_error(_kernelmap("resolve", "--op", "argmax", "--phase", "decode", "--isa", "bogus"), line, hint)


def test_chat_turn_longer_than_the_context_names_the_input_line(synth):
    _user_error(_kernelmap("chat", "-m", str(synth), "-ub", "8", "-t", "1", "-c", "5", "-q", stdin=b"the cat\n"),
                "stdin line 1: the conversation has more tokens than the context holds (found 21; expected at most 5, "
                "set by --ctx 5)", "use a larger --ctx, or start a new chat")


def test_default_context_fits_a_model_trained_for_less(synth):
    proc = _run(synth, "-p", "the cat", "-n", "2")  # trained for 256 tokens: the default is 256, not 4096
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("the cat")
    _user_error(_run(synth, "-p", "the cat", "-n", "2", "-c", "300"),
                "--ctx: context length out of range (found 300; expected 1..256 (the trained context))")


def test_model_call_errors_name_what_they_are_about(compiled):
    with Model(compiled, n_ctx=16, threads=1) as m:
        with pytest.raises(ModelError) as info:
            m.prefill([2, m.n_vocab + 5])
        assert info.value.line() == f"token id: token id outside the vocabulary (found {m.n_vocab + 5}; expected " \
                                    f"0..{m.n_vocab - 1})"
        m.reset()
        m.prefill([2, 270])
        with pytest.raises(ModelError) as info:
            m.decode(-1)
        assert info.value.pointer == "token id" and info.value.value == -1
