"""What installing functai brings: the distributions a fresh venv gains (pip and setuptools aside)
and the bytes of their installed files.

    python benchmarks/footprint.py [CHECKOUT]      (default: this checkout)
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: Run in the venv: each distribution's name and the bytes of the files its RECORD lists.
MEASURE = """
import importlib.metadata, json, os
found = {}
for dist in importlib.metadata.distributions():
    name = dist.metadata["Name"]
    if name.lower() in ("pip", "setuptools"):
        continue
    size = 0
    for file in dist.files or ():
        try:
            size += os.path.getsize(dist.locate_file(file))
        except OSError:
            pass
    found[name] = size
print(json.dumps(found))
"""


def footprint(checkout: pathlib.Path = ROOT) -> dict[str, int]:
    """The distributions (name: bytes) a fresh venv holds after ``pip install CHECKOUT``."""
    with tempfile.TemporaryDirectory() as work:
        venv = pathlib.Path(work) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(checkout)],
                       check=True)
        out = subprocess.run([python, "-c", MEASURE], check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out))


def main() -> None:
    checkout = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    found = footprint(checkout)
    print(f"{len(found)} distributions, {sum(found.values()) / 2**20:.1f} MiB installed:")
    for name, size in sorted(found.items(), key=lambda item: -item[1]):
        print(f"  {name}: {size / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
