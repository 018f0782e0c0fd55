"""Build envcheck as one file, for a node that has only a Python interpreter (3.9+).

    python dev/build_zipapp.py [-o dist/envcheck.pyz]
    scp dist/envcheck.pyz node17: && ssh node17 python3 envcheck.pyz check torch==2.6.0

A shiv zipapp (pip install shiv): envcheck and the pure-Python packages ``check`` and
``summary`` import — typer (with its vendored click), annotated-doc, shellingham,
packaging, tabulate, tomli (for Python < 3.11) — at the versions installed here. On its
first start it unpacks itself under ~/.shiv (SHIV_ROOT moves that), so the matrix's TOML
files are plain files again. pydantic is left out on purpose: it has a compiled part
tied to one Python version and platform, and ``check`` and ``summary`` never load it
(cli._fast_plain_options); a command that needs it says so in one line. ``envcheck run``
needs torch on the node anyway: install envcheck there.
"""

import argparse
import importlib.metadata
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("typer", "annotated-doc", "shellingham", "packaging", "tabulate", "tomli")


def pinned():
    out = []
    for name in PACKAGES:
        try:
            out.append("%s==%s" % (name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            if name != "tomli":  # tomli: only where this Python is older than 3.11
                sys.exit("%s is not installed here: pip install -e '.[test]' first" % name)
            out.append("tomli")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "dist", "envcheck.pyz"))
    args = ap.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    cmd = [sys.executable, "-m", "shiv", "-o", args.output, "-e", "envcheck.cli:entry",
           "-p", "/usr/bin/env python3", "--reproducible", "--no-deps", ROOT] + pinned()
    print(" ".join(cmd))
    subprocess.run(cmd, check=True)
    print("built %s (%d KiB)" % (args.output, os.path.getsize(args.output) // 1024))


if __name__ == "__main__":
    main()
