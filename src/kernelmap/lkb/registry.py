"""LKB stage, registry: the hardware class chain and its KERNEL_FAMILIES / FUSIONS files resolved per class.

Input: `classes/<class>/{HARDWARE,KERNEL_FAMILIES,FUSIONS}.toml` and DEVICES.toml. Output: a `Chain`
that resolves, for one class, its features, families and lowering rules nearest-first (a class's own
entry overrides its ancestors' by id; params and points merge by name and id). It does not read
kernel maps (coverage.py) nor measurements (evidence.py).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelmap.errors import LKBError, closest
from kernelmap.lkb import schemas
from kernelmap.lkb._io import read_toml

__all__ = ["CLASSES_DIR", "DEVICES_PATH", "Chain", "Family", "HardwareClass", "Param", "Point", "Rule",
           "load_chain", "load_devices"]

LKB_DIR = Path(__file__).resolve().parent
CLASSES_DIR = LKB_DIR / "classes"
DEVICES_PATH = LKB_DIR / "DEVICES.toml"
_FAMILY_REQUIRED = ("ops", "formats", "rows_per_call", "compute", "pipeline")
_POINT_REQUIRED = ("classes", "providers", "params")


@dataclass(frozen=True)
class HardwareClass:
    """One class folder: its HARDWARE.toml facts (own features only; `Chain.features` accumulates)."""

    name: str
    parent: str | None
    arch: str
    vector_bits: int
    features: frozenset[str]
    defaults: dict[str, Any]
    path: Path


@dataclass(frozen=True)
class Param:
    """A family parameter: kind runtime | compile | policy | numerics, optional allowed values."""

    name: str
    kind: str
    values: tuple[Any, ...] | None
    desc: str = ""


@dataclass(frozen=True)
class Point:
    """A concrete value of a family's parameters naming its (provider, variant)s. How it is realized
    (reference, instantiation, copy) is not declared: kernelmap.lkb.derive measures it from the sources."""

    id: str
    family: str
    classes: tuple[str, ...]
    providers: tuple[tuple[str, str], ...]
    params: dict[str, Any] = field(compare=False)
    reason: str = ""
    evidence: str = ""
    path: Path | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Family:
    """One algorithm for one op class, as resolved on one class of the chain."""

    id: str
    ops: tuple[str, ...]
    formats: tuple[str, ...]
    rows_per_call: int | str
    compute: str
    desc: str
    pipeline: dict[str, str] = field(compare=False)
    params: tuple[Param, ...] = ()
    points: tuple[Point, ...] = ()
    path: Path | None = field(default=None, compare=False)

    def numerics(self, point: Point) -> dict[str, Any]:
        """The numerics parameter values of `point` (the part that decides its bits)."""
        names = [p.name for p in self.params if p.kind == "numerics"]
        return {n: point.params.get(n) for n in names}


@dataclass(frozen=True)
class Rule:
    """A lowering rule: `family` serves `op` at these row counts on the class (optionally only `points`)."""

    id: str
    op: str
    family: str
    rows: tuple[int, ...]
    points: tuple[str, ...] = ()
    path: Path | None = None


def _merge_family(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Nearest-first merge: scalar fields replace, `param` merges by name, `point` by id."""
    out = dict(base)
    for key, value in over.items():
        if key in ("param", "point"):
            ident = "name" if key == "param" else "id"
            merged = {item[ident]: item for item in base.get(key, [])}
            for item in value:
                merged[item[ident]] = item
            out[key] = list(merged.values())
        else:
            out[key] = value
    return out


class Chain:
    """Every class found under a classes directory, with per-class resolution along the parent chain."""

    def __init__(self, classes: dict[str, HardwareClass], root: Path) -> None:
        self.classes = classes
        self.root = root
        self._families: dict[str, dict[str, Family]] = {}
        self._rules: dict[str, dict[str, Rule]] = {}

    def get(self, name: str) -> HardwareClass:
        """The class called `name`, or an LKBError naming the closest known class."""
        if name not in self.classes:
            near = closest(name, list(self.classes))
            raise LKBError(f"unknown hardware class {name!r}" + (f" (closest: {near})" if near else ""),
                           path=self.root, pointer="class", value=name, expected=sorted(self.classes))
        return self.classes[name]

    def lineage(self, name: str) -> list[HardwareClass]:
        """The chain from the root down to `name` (root first)."""
        out = []
        cur: str | None = name
        while cur is not None:
            cls = self.get(cur)
            out.append(cls)
            cur = cls.parent
        return out[::-1]

    def features(self, name: str) -> frozenset[str]:
        """All features of `name`: its own plus every ancestor's."""
        feats: set[str] = set()
        for cls in self.lineage(name):
            feats |= cls.features
        return frozenset(feats)

    def classes_having(self, required: frozenset[str] | set[str]) -> list[str]:
        """Names of the classes whose features include every feature in `required`."""
        return sorted(n for n in self.classes if set(required) <= self.features(n))

    def _class_file(self, name: str, stem: str) -> Path:
        return self.classes[name].path.parent / f"{stem}.toml"

    def families(self, name: str) -> dict[str, Family]:
        """Families resolved on class `name`, by id (nearest manifest first, override by id)."""
        if name in self._families:
            return self._families[name]
        raw: dict[str, dict[str, Any]] = {}
        origin: dict[str, tuple[Path, int]] = {}
        for cls in self.lineage(name):
            path = self._class_file(cls.name, "KERNEL_FAMILIES")
            if not path.is_file():
                continue
            data = _read_cached(path, "families")
            for i, entry in enumerate(data.get("family", [])):
                fid = entry["id"]
                for point in entry.get("point", []):
                    point.setdefault("_path", str(path))
                if fid in raw:
                    raw[fid] = _merge_family(raw[fid], entry)
                else:
                    raw[fid] = dict(entry)
                    origin[fid] = (path, i)
        out = {fid: _build_family(fid, entry, *origin[fid], self) for fid, entry in sorted(raw.items())}
        self._families[name] = out
        return out

    def rules(self, name: str) -> dict[str, Rule]:
        """Lowering rules resolved on class `name`, by id; each names a family resolved on the class."""
        if name in self._rules:
            return self._rules[name]
        out: dict[str, Rule] = {}
        for cls in self.lineage(name):
            path = self._class_file(cls.name, "FUSIONS")
            if not path.is_file():
                continue
            for entry in _read_cached(path, "fusions").get("rule", []):
                out[entry["id"]] = Rule(entry["id"], entry["op"], entry["family"], tuple(entry["rows"]),
                                        tuple(entry.get("points", ())), path)
        fams = self.families(name)
        for rule in out.values():
            if rule.family not in fams:
                near = closest(rule.family, list(fams))
                raise LKBError(f"rule {rule.id!r} names a family class {name} does not have"
                               + (f" (closest: {near})" if near else ""), path=rule.path,
                               pointer=f"rule {rule.id}/family", value=rule.family)
        self._rules[name] = out
        return out

    def all_points(self) -> Iterator[tuple[str, Family, Point]]:
        """(class, family, point) for every point resolved on every class, classes sorted."""
        for name in sorted(self.classes):
            for fam in self.families(name).values():
                for point in fam.points:
                    yield name, fam, point


@functools.lru_cache(maxsize=256)
def _read_file(path: str, stamp: tuple[int, int], kind: str) -> dict[str, Any]:
    schema = {"families": schemas.FAMILIES, "fusions": schemas.FUSIONS}[kind]
    return read_toml(path, schema)


def _read_cached(path: Path, kind: str) -> dict[str, Any]:
    st = path.stat()
    return copy.deepcopy(_read_file(str(path), (st.st_mtime_ns, st.st_size), kind))


def _build_family(fid: str, entry: dict[str, Any], path: Path, index: int, chain: Chain) -> Family:
    where = f"/family/{index}"
    for key in _FAMILY_REQUIRED:
        if key not in entry:
            raise LKBError(f"family {fid!r} has no {key!r} on any class of the chain", path=path,
                           pointer=f"{where}/{key}", hint="declare it where the family is first defined")
    params = tuple(Param(p["name"], p["kind"], tuple(p["values"]) if "values" in p else None, p.get("desc", ""))
                   for p in entry.get("param", []))
    kinds = {p.name: p.kind for p in params}
    for needed in ("reduction", "accumulator"):
        if kinds.get(needed) != "numerics":
            raise LKBError(f"family {fid!r} does not declare the numerics parameter {needed!r}", path=path,
                           pointer=f"{where}/param", expected="numerics params reduction and accumulator")
    points = []
    seen: set[str] = set()
    for j, raw in enumerate(entry.get("point", [])):
        ppath = Path(raw.get("_path", path))
        pwhere = f"point {raw['id']}"
        for key in _POINT_REQUIRED:
            if key not in raw:
                raise LKBError(f"point lacks {key!r}", path=ppath, pointer=f"{pwhere}/{key}")
        if "how" in raw:
            raise LKBError("point declares `how`, which is measured from its variants' C sources "
                           "(kernelmap.lkb.derive: instantiation, copy or reference)", path=ppath,
                           pointer=f"{pwhere}/how", value=raw["how"], hint="remove the line")
        if raw["id"] in seen:
            raise LKBError("duplicate point id", path=ppath, pointer=f"{where}/point/{j}/id", value=raw["id"])
        seen.add(raw["id"])
        for pname in raw["params"]:
            if pname not in kinds:
                raise LKBError(f"point sets an undeclared parameter {pname!r}", path=ppath,
                               pointer=f"{pwhere}/params/{pname}", expected=sorted(kinds))
            if kinds[pname] == "runtime":
                raise LKBError(f"runtime parameter {pname!r} does not define a point", path=ppath,
                               pointer=f"{pwhere}/params/{pname}")
        for prm in params:
            if prm.kind == "runtime":
                continue
            if prm.name not in raw["params"]:
                raise LKBError(f"point does not set the {prm.kind} parameter {prm.name!r}", path=ppath,
                               pointer=f"{pwhere}/params/{prm.name}")
            if prm.values is not None and raw["params"][prm.name] not in prm.values:
                raise LKBError(f"value not allowed for {prm.name!r}", path=ppath,
                               pointer=f"{pwhere}/params/{prm.name}", value=raw["params"][prm.name],
                               expected=list(prm.values))
        for cname in raw["classes"]:
            if cname not in chain.classes:
                near = closest(cname, list(chain.classes))
                raise LKBError("point names an unknown class" + (f" (closest: {near})" if near else ""),
                               path=ppath, pointer=f"{pwhere}/classes", value=cname)
        provs = tuple((p["provider"], v) for p in raw["providers"] for v in p["variants"])
        points.append(Point(raw["id"], fid, tuple(raw["classes"]), provs, dict(raw["params"]),
                            raw.get("reason", ""), raw.get("evidence", ""), ppath))
    return Family(fid, tuple(entry["ops"]), tuple(entry["formats"]), entry["rows_per_call"], entry["compute"],
                  entry.get("desc", ""), dict(entry["pipeline"]), params, tuple(points), path)


def load_chain(root: Path | str = CLASSES_DIR) -> Chain:
    """Load every `<root>/<class>/HARDWARE.toml` and check the parent links (known, acyclic, same arch)."""
    root = Path(root)
    classes: dict[str, HardwareClass] = {}
    for hw in sorted(root.glob("*/HARDWARE.toml")):
        data = read_toml(hw, schemas.HARDWARE)["class"]
        if data["name"] != hw.parent.name:
            raise LKBError("class name differs from its folder", path=hw, pointer="/class/name",
                           value=data["name"], expected=hw.parent.name)
        raw_defaults = read_toml(hw, schemas.HARDWARE).get("defaults", {})
        classes[data["name"]] = HardwareClass(data["name"], data.get("parent"), data["arch"], data["vector_bits"],
                                              frozenset(data["features"]), dict(raw_defaults), hw)
    if not classes:
        raise LKBError("no hardware classes found", path=root, expected="<class>/HARDWARE.toml folders")
    for cls in classes.values():
        seen = {cls.name}
        cur = cls
        while cur.parent is not None:
            if cur.parent not in classes:
                near = closest(cur.parent, list(classes))
                raise LKBError("parent class does not exist" + (f" (closest: {near})" if near else ""),
                               path=cur.path, pointer="/class/parent", value=cur.parent)
            parent = classes[cur.parent]
            if parent.arch not in ("any", cur.arch):
                raise LKBError("parent class is for another architecture", path=cur.path,
                               pointer="/class/parent", value=parent.arch, expected=cur.arch)
            if parent.name in seen:
                raise LKBError("class chain has a cycle", path=cur.path, pointer="/class/parent",
                               value=parent.name)
            seen.add(parent.name)
            cur = parent
    return Chain(classes, root)


def load_devices(path: Path | str = DEVICES_PATH) -> list[dict[str, Any]]:
    """The per-SKU device records of DEVICES.toml."""
    return list(read_toml(path, schemas.DEVICES).get("device", []))
