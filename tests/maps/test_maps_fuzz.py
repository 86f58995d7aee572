"""Property tests: malformed input (random expressions, randomly mutated maps) only ever raises our errors."""

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from mapgen import make_map

from kernelmap.errors import MapError
from kernelmap.maps.expr import ExprSyntaxError, ExprValueError, parse_expr
from kernelmap.maps.loader import load_map

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 300) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


@given(st.text(alphabet="KNM0123456789+-*/() ceil", max_size=40))
def test_expr_random_text_parses_or_raises_syntax_error(text):
    try:
        e = parse_expr(text)
    except ExprSyntaxError:
        return
    try:
        e.evaluate({"K": 256, "N": 7, "M": 1})
    except ExprValueError:
        pass


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


_BASE = make_map("fuzz_map", status="candidate", constraints={"K": {"multiple": 256}, "N": {"min": "K / 256"}})
_PATHS = [p for p in _paths(_BASE) if p]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PATHS), _JSON, st.booleans()), min_size=1, max_size=3))
def test_loader_randomly_mutated_map_raises_only_map_error(tmp_path_factory, edits):
    doc = copy.deepcopy(_BASE)
    for path, value, delete in edits:
        parent = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            if delete and isinstance(parent, dict):
                parent.pop(path[-1], None)
            elif isinstance(parent, (dict, list)):
                parent[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    path = tmp_path_factory.mktemp("fuzz") / "fuzz_map.json"
    data = json.dumps(doc).encode()
    try:
        load_map(path, data=data)
    except MapError as exc:
        assert "\n" not in exc.line() and exc.path == str(path)
