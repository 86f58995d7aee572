"""Map stage: one kernel-map JSON file -> a validated `Provider` (schema first, then semantic checks).

The schema (kernel_map.schema.json, draft 2020-12) checks shapes and vocabularies; this module adds
what a schema cannot: id equals the file stem, call_abi binds every port exactly once with the right
source kind and a C parameter name that says what it carries, names and expressions refer to declared
dims (constant ones evaluate: `1/0` or a negative size is refused), symbols follow `km_<id>__<variant>`,
sources exist. Every failure is a one-line MapError with path and JSON pointer. It does not compare
maps with each other (registry.py does).

Schema checks of known bytes are remembered (`trusted` loads, the default): jsonschema walks a map in ~4 ms, and
every `kernelmap run` loads ~120 maps (0.45 of a warm run's 2.4 s on the EPYC VM of December 2026). A map's
schema check depends only on its bytes, the schema's bytes and the jsonschema release, so a pass is recorded
under the sha256 of the three (this process's set, and an empty marker file under the build cache's
`maps_schema_ok/`) and a map with the same digest skips that walk; a failure is never recorded, and the
semantic checks below run on every load. The markers are trusted as the compiled libraries in the same cache
are. `kernelmap maps validate` loads untrusted: every schema check runs.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import re
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from kernelmap import isa_flags
from kernelmap.errors import MapError, closest
from kernelmap.maps.expr import Expr, ExprSyntaxError, ExprValueError, parse_expr
from kernelmap.maps.provider import CallParam, Constraint, Param, Port, Provider, Scratch, Variant
from kernelmap.target import KNOWN_FEATURES

__all__ = ["MAX_JSON_DEPTH", "SCHEMA_PATH", "binding_names", "check_schema", "load_map", "parse_json", "too_deep",
           "validate_map"]

SCHEMA_PATH = Path(__file__).with_name("kernel_map.schema.json")
MAX_MAP_BYTES = 1 << 20

_PORT_KINDS = ("output", "activation", "weight", "weight_opt", "state", "scratch")


@functools.lru_cache(maxsize=1)
def _schema_salt() -> bytes | None:
    """What a map's schema-check result depends on besides its own bytes: the schema and the jsonschema release
    (None when the release cannot be read: then nothing is remembered)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("jsonschema")
    except PackageNotFoundError:
        return None
    return (hashlib.sha256(SCHEMA_PATH.read_bytes()).hexdigest() + "\0" + release).encode()


_SCHEMA_OK: set[str] = set()  # digests of map bytes that passed the schema check in this process


def _schema_digest(data: bytes) -> str | None:
    salt = _schema_salt()
    if salt is None:
        return None
    h = hashlib.sha256(b"kernelmap map schema check v1\0")
    h.update(salt)
    h.update(b"\0")
    h.update(data)
    return h.hexdigest()


def _schema_marker(digest: str) -> Path:
    from kernelmap.build.driver import cache_dir

    return cache_dir() / "maps_schema_ok" / digest[:2] / digest


def _validate_trusted(doc: Any, data: bytes, path: Path) -> None:
    """validate_map, skipped when these exact bytes passed it before (module docstring); a pass is recorded."""
    digest = _schema_digest(data)
    if digest is None:
        validate_map(doc, path)
        return
    if digest in _SCHEMA_OK:
        return
    marker = _schema_marker(digest)
    if marker.is_file():
        _SCHEMA_OK.add(digest)
        return
    validate_map(doc, path)
    _SCHEMA_OK.add(digest)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:  # a read-only cache: the next process checks again
        pass


@functools.lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# Deepest nesting of arrays and objects any of our JSON inputs has (a kernel map nests ~6 levels, an HTTP body
# ~5): deeper input is refused before parsing, as Python's decoder recurses per level and would otherwise fail
# with a RecursionError at a depth that depends on the caller's stack.
MAX_JSON_DEPTH = 200
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON `text` (brackets inside strings do not count)."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(itertools.accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


def too_deep(text: str) -> int | None:
    """The nesting depth of JSON `text` when it exceeds MAX_JSON_DEPTH, else None (cheap for ordinary text)."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return None
    depth = json_depth(text)
    return depth if depth > MAX_JSON_DEPTH else None


def parse_json(data: bytes, path: Path | str, error: type = MapError) -> Any:
    """Strict JSON: UTF-8, no duplicate keys, no NaN/Infinity, at most MAX_JSON_DEPTH levels; failures raise
    `error` naming the file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error("not UTF-8 text", path=path, pointer="", value=f"byte {exc.start}") from None
    depth = too_deep(text)
    if depth is not None:
        raise error("not valid JSON: nested too deeply", path=path, pointer="", value=depth,
                    expected=f"at most {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise error(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                    path=path, pointer="") from None
    except ValueError as exc:
        raise error(f"not valid JSON: {exc}", path=path, pointer="") from None
    except RecursionError:  # the caller's stack was already deep
        raise error("not valid JSON: nested too deeply", path=path, pointer="") from None


def _pointer(parts: Any) -> str:
    out = ""
    for p in parts:
        out += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return out


def schema_error(err: ValidationError, path: Path | str, error: type = MapError) -> Exception:
    """Translate one jsonschema error into a one-line error in our words (shared with the policy loader)."""
    ptr = _pointer(err.absolute_path)
    title = err.schema.get("title") if isinstance(err.schema, dict) else None
    v = err.validator
    if v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        word = extra[0] if extra else "?"
        near = closest(word, allowed)
        return error(f"unknown field \"{word}\"", path=path, pointer=ptr + "/" + word,
                     expected=allowed or None, hint=f"did you mean \"{near}\"?" if near else None)
    if v == "required":
        missing = [k for k in err.validator_value if isinstance(err.instance, dict) and k not in err.instance]
        word = missing[0] if missing else "?"
        return error(f"missing field \"{word}\"", path=path, pointer=ptr + "/" + word)
    if v == "enum":
        allowed = [str(x) for x in err.validator_value]
        near = closest(str(err.instance), allowed)
        noun = title or "value"
        return error(f"unknown {noun}", path=path, pointer=ptr, value=err.instance, expected=allowed,
                     hint=f"closest: {near}" if near else None)
    if v == "const":
        return error(f"unsupported {title or 'value'}", path=path, pointer=ptr, value=err.instance,
                     expected=json.dumps(err.validator_value))
    if v == "type":
        want = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
        return error(f"wrong type for {title or 'field'}", path=path, pointer=ptr, value=err.instance,
                     expected=want)
    if v == "pattern":
        return error(f"malformed {title or 'string'}", path=path, pointer=ptr, value=err.instance,
                     expected=f"a string matching {err.validator_value}")
    if v in _SIZE_WORDS:
        noun = title or (str(err.absolute_path[-1]) if err.absolute_path else "document")
        return error(f"{noun} {_SIZE_WORDS[v].format(n=err.validator_value)}", path=path, pointer=ptr,
                     value=err.instance)
    if v == "uniqueItems":
        return error(f"{title or 'list'} has duplicate items", path=path, pointer=ptr, value=err.instance)
    if v in ("minimum", "maximum"):
        return error(f"{title or 'number'} out of range ({v} {err.validator_value})", path=path,
                     pointer=ptr, value=err.instance)
    if v in ("oneOf", "anyOf"):
        return error(f"invalid {title or 'value'}", path=path, pointer=ptr, value=err.instance,
                     hint="see the schema for the allowed forms")
    return error(f"invalid value ({v})", path=path, pointer=ptr, value=err.instance)


_SIZE_WORDS = {
    "minItems": "has fewer than {n} items", "maxItems": "has more than {n} items",
    "minLength": "is shorter than {n} characters", "maxLength": "is longer than {n} characters",
    "minProperties": "has fewer than {n} fields",
}


def _relevance(err: ValidationError) -> tuple[Any, ...]:
    # Prefer deep, specific errors; break ties deterministically by pointer text.
    return (-len(err.absolute_path), err.validator in ("oneOf", "anyOf"), _pointer(err.absolute_path))


def check_schema(validator: Draft202012Validator, doc: Any, path: Path | str, error: type = MapError) -> None:
    """Validate `doc`; raise `error` for the most specific failure (deepest pointer, deterministic)."""
    errors = sorted(validator.iter_errors(doc), key=_relevance)
    if not errors:
        return
    err = errors[0]
    while err.context:
        err = sorted(err.context, key=_relevance)[0]
    raise schema_error(err, path, error) from None


def validate_map(doc: Any, path: Path | str) -> None:
    """Schema-validate a parsed map; raise a MapError for the most specific failure."""
    check_schema(_validator(), doc, path)


class _Checker:
    """Semantic checks over one schema-valid map; raises MapError at the first violation."""

    def __init__(self, doc: dict[str, Any], path: Path, kernel_root: Path | None) -> None:
        self.doc = doc
        self.path = path
        self.kernel_root = kernel_root
        self.dims = set(doc["dims"])

    def fail(self, message: str, pointer: str, **kw: Any) -> None:
        raise MapError(message, path=self.path, pointer=pointer, **kw)

    def expr(self, value: Any, pointer: str, *, what: str = "expression", nonnegative: bool = False) -> Expr:
        """Parse an expression of declared dims; a constant one is evaluated now (it must be an integer,
        and not negative when `nonnegative`), so `1/0` is a load error and never a run-time surprise."""
        try:
            e = parse_expr(value)
        except ExprSyntaxError as exc:
            self.fail(f"bad expression: {exc}", pointer, value=value)
        unknown = sorted(e.names - self.dims)
        if unknown:
            near = closest(unknown[0], sorted(self.dims))
            self.fail(f"expression uses undeclared dim \"{unknown[0]}\"", pointer, value=value,
                      expected=sorted(self.dims) or "a name listed in /dims",
                      hint=f"closest: {near}" if near else "declare it in /dims")
        if not e.names:
            try:
                const = e.evaluate({})
            except ExprValueError as exc:
                self.fail(f"constant {what} cannot be evaluated: {exc}", pointer, value=value)
            if nonnegative and const < 0:
                self.fail(f"{what} is negative", pointer, value=value, expected=">= 0")
        return e

    def constraints(self, obj: dict[str, Any], pointer: str) -> tuple[Constraint, ...]:
        out = []
        for dim in sorted(obj):
            if dim not in self.dims:
                near = closest(dim, sorted(self.dims))
                self.fail(f"constraint on undeclared dim \"{dim}\"", f"{pointer}/{dim}",
                          expected=sorted(self.dims), hint=f"closest: {near}" if near else None)
            for rule in sorted(obj[dim]):
                ptr = f"{pointer}/{dim}/{rule}"
                e = self.expr(obj[dim][rule], ptr, what="constraint bound")
                c = Constraint(dim, rule, e)
                if rule == "multiple" and c.const is not None and c.const <= 0:
                    self.fail("\"multiple\" needs a positive bound", ptr, value=obj[dim][rule], expected=">= 1")
                out.append(c)
        return tuple(out)

    def ports(self) -> dict[str, Port]:
        seen: dict[str, str] = {}
        ports: dict[str, Port] = {}
        for key, role in (("inputs", "input"), ("weights", "weight"), ("outputs", "output")):
            for i, p in enumerate(self.doc[key]):
                ptr = f"/{key}/{i}"
                if p["name"] in seen:
                    self.fail(f"duplicate port name \"{p['name']}\" (also {seen[p['name']]})", ptr + "/name")
                seen[p["name"]] = ptr
                shape = tuple(self.expr(s, f"{ptr}/shape/{j}", what="port dimension", nonnegative=True)
                              for j, s in enumerate(p["shape"]))
                if role == "weight" and p["storage"] != "weight":
                    self.fail("a weight port must have storage \"weight\"", ptr + "/storage",
                              value=p["storage"], expected="weight")
                if role != "weight" and p["storage"] == "weight":
                    self.fail(f"storage \"weight\" is only for /weights ports, not {key}", ptr + "/storage")
                if p["access"] == "gather" and role != "weight":  # rows picked at run time: the table stays paged
                    self.fail("access \"gather\" is only for /weights ports (a table read by rows chosen at run "
                              f"time), not {key}", ptr + "/access", value="gather", expected="read")
                if role == "input" and p["access"] != "read" and p["storage"] != "state":
                    self.fail("an input port that is not state must be read-only", ptr + "/access",
                              value=p["access"], expected="read")
                if role == "output" and p["access"] == "read":
                    self.fail("an output port must be written", ptr + "/access", value="read",
                              expected="write, read_write")
                if p.get("may_alias") and role != "output":
                    self.fail("only output ports may declare may_alias", ptr + "/may_alias")
                if "ring" in p and p["storage"] != "state":
                    self.fail("only state ports may declare ring", ptr + "/ring", value=p["ring"])
                if p.get("ring", "write") != "write" and not any(
                        q["name"] == p["ring"] and q["type"] == "int64" for q in self.doc.get("params", [])):
                    self.fail(f"ring names no int64 param \"{p['ring']}\"", ptr + "/ring", value=p["ring"],
                              expected="\"write\" or an int64 param bounding the positions a row reads")
                ports[p["name"]] = Port(p["name"], role, p["dtype"], shape, p["layout"], p["access"],
                                        p["storage"], bool(p.get("optional", False)),
                                        tuple(p.get("may_alias", ())), p.get("ring"))
        inputs = {n for n, p in ports.items() if p.role == "input"}
        for key, i, p in ((k, i, p) for k in ("outputs",) for i, p in enumerate(self.doc[k])):
            for j, alias in enumerate(p.get("may_alias", ())):
                target = alias.split(":", 1)[1]
                if target not in inputs:
                    near = closest(target, sorted(inputs))
                    self.fail(f"may_alias names unknown input \"{target}\"", f"/{key}/{i}/may_alias/{j}",
                              expected=sorted(inputs), hint=f"closest: {near}" if near else None)
        return ports

    def quant(self) -> None:
        """`quant` summarises the ports, so each of its dtypes must be the dtype of a port of that list
        (`none` exactly when the list is empty)."""
        for field, key in (("weight", "weights"), ("activation", "inputs"), ("output", "outputs")):
            allowed = sorted({p["dtype"] for p in self.doc[key]}) or ["none"]
            if self.doc["quant"][field] not in allowed:
                self.fail(f"quant.{field} is not the dtype of any port in /{key}", f"/quant/{field}",
                          value=self.doc["quant"][field], expected=allowed)

    def isa(self, v: dict[str, Any], ptr: str) -> None:
        """A variant's cflags are all in the ISA flag table (one architecture, arithmetic flags refused),
        and its requires lists exactly features those flags imply, including every listed one."""
        arch = None
        for j, flag in enumerate(v["cflags"]):
            if isa_flags.arithmetic_flag(flag):
                self.fail(f"cflag \"{flag}\" changes floating-point arithmetic and is refused", f"{ptr}/cflags/{j}",
                          hint="kernel arithmetic is fixed by the base flags and the map's numerics contract")
            entry = isa_flags.FLAGS.get(flag)
            if entry is None:
                near = closest(flag, sorted(isa_flags.FLAGS))
                self.fail(f"unknown cflag \"{flag}\" (not in the ISA flag table)", f"{ptr}/cflags/{j}",
                          hint=(f"closest: {near}; " if near else "") + "the allowed flags and the features they "
                          "imply are in src/kernelmap/isa_flags.py")
            if arch is not None and entry.arch != arch:
                self.fail(f"cflag \"{flag}\" is for {entry.arch} but the variant's other cflags are for {arch}",
                          f"{ptr}/cflags/{j}")
            if flag.startswith("-march=") and any(f.startswith("-march=") for f in v["cflags"][:j]):
                self.fail("more than one -march cflag", f"{ptr}/cflags/{j}", value=flag)
            arch = entry.arch
        implied = isa_flags.variant_features((), v["cflags"])
        for j, feat in enumerate(v["requires"]):
            if feat not in KNOWN_FEATURES:
                near = closest(feat, sorted(KNOWN_FEATURES))
                self.fail("unknown isa feature", f"{ptr}/requires/{j}", value=feat,
                          hint=f"closest: {near} (Linux /proc/cpuinfo spelling)" if near
                          else "use the Linux /proc/cpuinfo spelling")
            if feat not in implied:
                flag = isa_flags.enabling_flag(feat)
                self.fail(f"variant requires {feat} but its cflags lack " + (flag or "a flag that enables it"),
                          ptr + "/cflags", value=v["cflags"],
                          hint="requires names what the variant's code is compiled to use")
        for flag in v["cflags"]:
            for feat in isa_flags.FLAGS[flag].enables:
                if feat not in v["requires"]:
                    self.fail(f"variant compiles with {flag} but does not require {feat}", ptr + "/requires",
                              value=v["requires"], hint=f"add \"{feat}\": code built with {flag} may use it, and "
                              "the resolver selects the variant only on what requires lists")
        for flag in v["cflags"]:
            for feat in sorted(isa_flags.implied_by(flag)):
                if isa_flags.FEATURES[feat].listed and feat not in v["requires"]:
                    self.fail(f"variant compiles with {flag}, which implies {feat}, but does not require {feat}",
                              ptr + "/requires", value=v["requires"],
                              hint=f"add \"{feat}\" (gcc/clang enable it with {flag}; see src/kernelmap/isa_flags.py)")

    def variants(self, map_id: str) -> tuple[Variant, ...]:
        sources = set(self.doc["sources"])
        out: list[Variant] = []
        names: dict[str, int] = {}
        prios: dict[int, str] = {}
        for i, v in enumerate(self.doc["variants"]):
            ptr = f"/variants/{i}"
            if v["name"] in names:
                self.fail(f"duplicate variant name \"{v['name']}\"", ptr + "/name")
            names[v["name"]] = i
            want = f"km_{map_id}__{v['name']}"
            if v["symbol"] != want:
                self.fail("symbol does not follow km_<id>__<variant>", ptr + "/symbol", value=v["symbol"],
                          expected=want)
            if v["source"] not in sources:
                self.fail("variant source is not listed in /sources", ptr + "/source", value=v["source"],
                          expected=sorted(sources))
            if v["priority"] in prios:
                self.fail(f"variant priority {v['priority']} ties with variant \"{prios[v['priority']]}\"",
                          ptr + "/priority", hint="variant priorities must be distinct so ranking is total")
            prios[v["priority"]] = v["name"]
            self.isa(v, ptr)
            if v["name"] == "ref" and v["requires"]:
                self.fail("the ref variant is the scalar oracle and may not require isa features",
                          ptr + "/requires", value=v["requires"], expected="[]")
            cons = self.constraints(v.get("constraints", {}), ptr + "/constraints")
            out.append(Variant(v["name"], v["symbol"], v["source"], frozenset(v["requires"]),
                               tuple(v["cflags"]), v["priority"], cons))
        # A candidate may be written before its C exists; a production provider may not.
        if self.kernel_root is not None and self.doc["selection"]["status"] == "production":
            for i, src in enumerate(self.doc["sources"]):
                if not (self.kernel_root / src).is_file():
                    self.fail("source file of a production map not found under the kernel root",
                              f"/sources/{i}", value=src, hint=f"kernel root is {self.kernel_root}")
        return tuple(out)

    def call_abi(self, ports: dict[str, Port], params: set[str], scratch: set[str]) -> tuple[CallParam, ...]:
        from kernelmap.codegen.bind import C_KEYWORDS  # names end up in the generated prototypes

        out: list[CallParam] = []
        names: set[str] = set()
        bound: dict[str, str] = {}
        for i, cp in enumerate(self.doc["call_abi"]["params"]):
            ptr = f"/call_abi/params/{i}"
            if cp["name"] in names:
                self.fail(f"duplicate C parameter name \"{cp['name']}\"", ptr + "/name")
            names.add(cp["name"])
            kind, _, ref = cp["source"].partition(":")
            if kind in _PORT_KINDS and kind != "scratch":
                port = ports.get(ref)
                if port is None:
                    near = closest(ref, sorted(ports))
                    self.fail(f"call_abi source names unknown port \"{ref}\"", ptr + "/source",
                              value=cp["source"], expected=sorted(ports),
                              hint=f"closest: {near}" if near else None)
                want = _port_kind(port)
                if kind != want:
                    self.fail(f"port \"{ref}\" must be bound as {want}:{ref}", ptr + "/source",
                              value=cp["source"], expected=f"{want}:{ref}")
                if ref in bound:
                    self.fail(f"port \"{ref}\" is bound twice (also {bound[ref]})", ptr + "/source")
                bound[ref] = ptr
            elif kind == "scratch" and ref not in scratch:
                self.fail(f"call_abi source names undeclared scratch \"{ref}\"", ptr + "/source",
                          expected=sorted(scratch) or "a name listed in /scratch")
            elif kind == "dim" and ref not in self.dims:
                near = closest(ref, sorted(self.dims))
                self.fail(f"call_abi source names undeclared dim \"{ref}\"", ptr + "/source",
                          expected=sorted(self.dims), hint=f"closest: {near}" if near else None)
            elif kind == "param" and ref not in params:
                near = closest(ref, sorted(params))
                self.fail(f"call_abi source names undeclared param \"{ref}\"", ptr + "/source",
                          expected=sorted(params) or "a name listed in /params",
                          hint=f"closest: {near}" if near else None)
            if cp["name"] in C_KEYWORDS:
                self.fail("a C parameter name may not be a C keyword", ptr + "/name", value=cp["name"])
            names_ok = binding_names(kind, ref)
            if names_ok is not None and cp["name"] not in names_ok:
                self.fail(f"C parameter \"{cp['name']}\" is bound to {cp['source']}: a parameter is named after "
                          "what it carries", ptr + "/name", value=cp["name"],
                          expected=" or ".join(names_ok),
                          hint="rename the parameter (in the map and in the kernel's C definition) or bind the "
                               "source its name says")
            out.append(CallParam(cp["name"], cp["source"], cp.get("cast")))
        unbound = [n for n in ports if n not in bound]
        if unbound:
            self.fail(f"call_abi does not bind port \"{unbound[0]}\"", "/call_abi/params",
                      expected=f"{_port_kind(ports[unbound[0]])}:{unbound[0]}")
        ringed = [n for n, p in ports.items() if p.ring is not None]
        if ringed and not any(cp.source == "runtime:kv_cells" for cp in out):
            self.fail(f"port \"{ringed[0]}\" declares ring but call_abi does not bind runtime:kv_cells",
                      "/call_abi/params", expected="the cache's cell count bound as runtime:kv_cells")
        if any(cp.source == "runtime:kv_cells" for cp in out) and not any(p.storage == "state" for p in ports.values()):
            self.fail("runtime:kv_cells is the cell count of the op's state buffers: this map has no state port",
                      "/call_abi/params")
        return tuple(out)

    def build(self, data: bytes) -> Provider:
        doc = self.doc
        map_id = doc["id"]
        if map_id != self.path.stem:
            self.fail("map id does not equal the file stem", "/id", value=map_id, expected=self.path.stem)
        sel, num = doc["selection"], doc["numerics"]
        if num["contract"] != sel["equivalence_group"]:
            self.fail("numerics.contract must equal selection.equivalence_group", "/numerics/contract",
                      value=num["contract"], expected=sel["equivalence_group"])
        ports = self.ports()
        self.quant()
        params: dict[str, Param] = {}
        for i, p in enumerate(doc.get("params", [])):
            if p["name"] in params:
                self.fail(f"duplicate param \"{p['name']}\"", f"/params/{i}/name")
            params[p["name"]] = Param(p["name"], p["type"], p.get("desc", ""))
        scratch: dict[str, Scratch] = {}
        for i, s in enumerate(doc.get("scratch", [])):
            if s["name"] in scratch:
                self.fail(f"duplicate scratch \"{s['name']}\"", f"/scratch/{i}/name")
            scratch[s["name"]] = Scratch(s["name"], self.expr(s["size"], f"/scratch/{i}/size",
                                                              what="scratch size", nonnegative=True))
        constraints = self.constraints(doc.get("constraints", {}), "/constraints")
        variants = self.variants(map_id)
        refs = [v for v in variants if v.name == "ref"]
        if not refs:
            self.fail("no variant named \"ref\" (the scalar oracle)", "/variants",
                      expected="a variant with name \"ref\"")
        if num["reference"] != refs[0].symbol:
            self.fail("numerics.reference must be the symbol of the ref variant", "/numerics/reference",
                      value=num["reference"], expected=refs[0].symbol)
        abi = self.call_abi(ports, set(params), set(scratch))

        def port_tuple(key: str) -> tuple[Port, ...]:
            return tuple(ports[p["name"]] for p in doc[key])

        return Provider(
            id=map_id, op=doc["op"], interface=doc["interface"], status=sel["status"],
            priority=sel["priority"], group=sel["equivalence_group"], phases=frozenset(sel["phases"]),
            contract=num["contract"], reference=num["reference"], comparison=num["comparison"],
            quant=dict(doc["quant"]), inputs=port_tuple("inputs"), weights=port_tuple("weights"),
            outputs=port_tuple("outputs"), dims=tuple(doc["dims"]), params=tuple(params.values()),
            scratch=tuple(scratch.values()), constraints=constraints, variants=variants,
            sources=tuple(doc["sources"]), call_abi=abi, tests=tuple(doc.get("tests", ())),
            notes=doc.get("notes", ""), path=self.path, sha256=hashlib.sha256(data).hexdigest(),
            raw=doc, ports=ports,
        )


# Run-time values and the C parameter names that may carry them: n_ctx is the value the KV capacity dim
# C (the interfaces' name for it) takes at run time.
_RUNTIME_NAMES = {"ith": ("ith",), "nth": ("nth",), "pos": ("pos",), "n_tokens": ("n_tokens",),
                  "n_ctx": ("n_ctx", "C"), "kv_cells": ("kv_cells", "C"), "positions": ("positions",), "slots": ("slots",)}


def binding_names(kind: str, ref: str) -> tuple[str, ...] | None:
    """The C parameter names a call_abi source may be bound to (its meaning); None when any name will do
    (a `const:` literal). `dim:N` is carried by N, `output:y` by y, `runtime:ith` by ith, and so on."""
    if kind == "const":
        return None
    if kind == "runtime":
        return _RUNTIME_NAMES.get(ref, (ref,))
    return (ref,)


def _port_kind(port: Port) -> str:
    if port.storage == "state":
        return "state"
    if port.role == "input":
        return "activation"
    if port.role == "weight":
        return "weight_opt" if port.optional else "weight"
    return "output"


def load_map(path: Path | str, *, kernel_root: Path | None = None, data: bytes | None = None,
             trusted: bool = True) -> Provider:
    """Read, schema-validate and semantically check one map; `kernel_root` None skips source-file checks;
    `trusted` False runs the schema check even for bytes that passed it before (module docstring)."""
    path = Path(path)
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise MapError(f"cannot read map: {exc.strerror}", path=path) from None
    if len(data) > MAX_MAP_BYTES:
        raise MapError("map file too large", path=path, value=len(data), expected=f"<= {MAX_MAP_BYTES} bytes")
    doc = parse_json(data, path)
    if trusted:
        _validate_trusted(doc, data, path)
    else:
        validate_map(doc, path)
    return _Checker(doc, path, kernel_root).build(data)
