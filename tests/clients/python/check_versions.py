"""Exits 0 if the pinned client versions of requirements.txt are installed."""
import pathlib
import sys
from importlib.metadata import PackageNotFoundError, version

req = pathlib.Path(__file__).with_name("requirements.txt")
bad = []
for line in req.read_text().splitlines():
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, want = line.split("==")
    try:
        got = version(name)
    except PackageNotFoundError:
        got = None
    if got != want:
        bad.append(f"{name}: want {want}, have {got}")
if bad:
    sys.exit("; ".join(bad))
