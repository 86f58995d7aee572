"""CLI: `kernelmap resolve` answers "which kernel would this op get" for any target ISA, without compiling.

Input: flags describing one request (op, phase, ports, dims, ISA; the contract from --contract or
the numerics policy). Output: the selected provider/variant on stdout (or the trace entry with
--json) and the candidate table on stderr. It writes no files.
"""

from __future__ import annotations

import json
import re
import sys

import click

from kernelmap.errors import RequestError, ResolutionError
from kernelmap.maps.registry import load_registry
from kernelmap.numerics import load_policy
from kernelmap.resolve import Request, resolve

__all__ = ["parse_isa_flag", "register"]

_PAIR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.+)$")


def _pairs(values: tuple[str, ...], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        m = _PAIR.match(v)
        if not m:
            raise RequestError(f"malformed {flag} value", pointer=flag, value=v, expected="NAME=VALUE")
        if m.group(1) in out:
            raise RequestError(f"{flag} {m.group(1)} given twice", pointer=flag, value=v)
        out[m.group(1)] = m.group(2)
    return out


def parse_isa_flag(text: str) -> frozenset[str]:
    """`host` (this machine, honouring KERNELMAP_ISA), `scalar`/`none`, or a comma list of features."""
    text = text.strip()
    if text == "host":
        from kernelmap.target import target_features

        return frozenset(target_features())
    if text in ("scalar", "none", ""):
        return frozenset()
    for f in (f.strip() for f in text.split(",")):
        if not re.match(r"^[a-z0-9_]+$", f):
            raise RequestError("malformed isa feature", pointer="--isa", value=f,
                               expected="host, scalar, a level (avx2, avx512, avx512vnni) or /proc/cpuinfo names")
    from kernelmap.errors import TargetError
    from kernelmap.target import parse_isa

    try:
        return frozenset(parse_isa(text))  # levels expand to their feature sets; unknown names fail closed
    except TargetError as exc:  # parse_isa names $KERNELMAP_ISA; here the text came from --isa
        raise TargetError(exc.message, pointer="--isa", value=exc.value, expected=exc.expected,
                          hint=exc.hint) from None


def register(cli: click.Group) -> None:
    """Add `resolve` to the CLI group."""

    @cli.command("resolve", epilog="Example: kernelmap resolve --op linear --phase decode --dtype weight=q4_k --dim K=640 --isa avx2,fma,f16c")
    @click.option("--op", required=True, help="Logical op (linear, rmsnorm, attention, ...).")
    @click.option("--phase", required=True, help="init, prefill or decode.")
    @click.option("--contract", help="Numerical contract; default: ask the policy with the --dtype keys.")
    @click.option("--interface", help="Require this operation interface.")
    @click.option("--port", "ports", multiple=True, metavar="NAME=DTYPE:LAYOUT", help="A port the op binds.")
    @click.option("--dtype", "dtypes", multiple=True, metavar="KEY=VALUE",
                  help="Policy keys, e.g. weight=q4_k, style=neox.")
    @click.option("--dim", "dims", multiple=True, metavar="NAME=INT|LO..HI",
                  help="A dim, e.g. K=640, or the range a run-time dim takes, e.g. M=1..128 (prefill rows).")
    @click.option("--alias", "aliases", multiple=True, metavar="OUT=IN", help="Compute OUT in place of IN.")
    @click.option("--isa", default="host", show_default=True, help="host, scalar, or features e.g. avx2,fma,f16c.")
    @click.option("--policy", default="llama-cpu", show_default=True, help="Numerics policy name or file.")
    @click.option("--maps", "maps", multiple=True, type=click.Path(file_okay=False), help="Extra map dir.")
    @click.option("--no-builtin", is_flag=True, help="Use only the --maps dirs.")
    @click.option("--allow-candidates", is_flag=True, help="Let candidate providers be selected.")
    @click.option("--label", default="", help="Op instance name for messages (default: the op).")
    @click.option("--json", "json_out", is_flag=True, help="Print the trace entry as JSON on stdout.")
    def resolve_cmd(op: str, phase: str, contract: str | None, interface: str | None, ports: tuple[str, ...],
                    dtypes: tuple[str, ...], dims: tuple[str, ...], aliases: tuple[str, ...], isa: str,
                    policy: str, maps: tuple[str, ...], no_builtin: bool, allow_candidates: bool, label: str,
                    json_out: bool) -> None:
        """Resolve one op instance against the kernel maps (what-if; nothing is compiled)."""
        port_map: dict[str, tuple[str, str]] = {}
        for name, spec in _pairs(ports, "--port").items():
            dtype, sep, layout = spec.partition(":")
            if not sep or not dtype or not layout:
                raise RequestError("malformed --port value", pointer="--port", value=f"{name}={spec}",
                                   expected="NAME=DTYPE:LAYOUT")
            port_map[name] = (dtype, layout)
        dim_map: dict[str, int | tuple[int, int]] = {}
        for name, val in _pairs(dims, "--dim").items():
            m = re.match(r"^([0-9]+)(?:\.\.([0-9]+))?$", val)
            if not m:
                raise RequestError("malformed --dim value", pointer="--dim", value=f"{name}={val}",
                                   expected="NAME=INT or NAME=LO..HI (a dim that varies at run time)")
            dim_map[name] = int(m.group(1)) if m.group(2) is None else (int(m.group(1)), int(m.group(2)))
        alias_set = frozenset(_pairs(aliases, "--alias").items())
        rule_note = ""
        if contract is None:
            pol = load_policy(policy)
            rule = pol.rule_for(op, **_pairs(dtypes, "--dtype"))
            contract = rule.contract
            rule_note = f" (policy {pol.name} {rule.pointer}: {rule.describe()})"
        request = Request(op=op, phase=phase, contract=contract, interface=interface, ports=port_map,
                          dims=dim_map, aliases=alias_set,
                          allow_status=frozenset({"production", "candidate"} if allow_candidates
                                                 else {"production"}),
                          isa=parse_isa_flag(isa), label=label or op)
        registry = load_registry(maps, builtin=not no_builtin, kernel_root=None)
        from kernelmap.cli.explain_cmd import render_rows

        try:
            res = resolve(request, registry)
        except ResolutionError as exc:
            entry = getattr(exc, "trace_entry", None)
            if entry is not None:
                render_rows(entry["rows"], f"{request.label}: candidates", sys.stderr)
                if json_out:
                    sys.stdout.write(json.dumps(entry, sort_keys=True, indent=1) + "\n")
            raise
        render_rows(res.trace_entry["rows"], f"{request.label}: candidates", sys.stderr)
        if json_out:
            sys.stdout.write(json.dumps(res.trace_entry, sort_keys=True, indent=1) + "\n")
        else:
            click.echo(f"{request.label}: {res.provider.id}/{res.variant.name} ({res.variant.symbol}) "
                       f"contract {res.provider.contract}{rule_note}")
