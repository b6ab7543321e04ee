"""Make the shared assertions of this folder (adapter_checks.py) importable by its tests."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
