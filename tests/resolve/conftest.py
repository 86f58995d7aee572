"""Make the synthetic map generator in tests/maps importable from the resolver tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "maps"))
