"""Build envcheck as one file, for a node that has only a Python interpreter (3.9+).

    python dev/build_zipapp.py [-o dist/envcheck.pyz]
    scp dist/envcheck.pyz node17: && ssh node17 python3 envcheck.pyz check torch==2.6.0

Built with the standard library's ``zipapp``, nothing to install: envcheck and the
pure-Python packages ``check`` and ``summary`` import — typer (with its vendored click),
annotated-doc, shellingham, packaging, tabulate, rich, tomli (for Python < 3.11),
prometheus-client (for --metrics) — at
the versions installed here. On its first start it unpacks itself under
``~/.cache/envcheck-pyz/`` (``ENVCHECK_PYZ_ROOT`` moves that), so the matrix's TOML files
are plain files again. pydantic is left out on purpose: it has a compiled part tied to
one Python version and platform, and ``check`` and ``summary`` never load it
(cli._fast_plain_options); a command that needs it says so in one line. ``envcheck run``
needs torch on the node anyway: install envcheck there from its clone (docs/install.md).
Run it in envcheck's own venv (pip install -e '.[test]'): it copies those packages from
there, and names the one it lacks when run elsewhere.
"""

import argparse
import hashlib
import importlib.metadata
import os
import shutil
import sys
import tempfile
import zipapp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (distribution, required): what `check` and `summary` import, all pure Python.
PACKAGES = (("typer", True), ("annotated-doc", False), ("shellingham", False),
            ("packaging", True), ("tabulate", True), ("rich", False),
            ("click", False), ("typing-extensions", False), ("tomli", False),
            ("prometheus-client", False))

# The archive's entry: unpack once per build into a cache, then run the CLI from there.
MAIN = '''\
import hashlib, os, sys, zipfile
archive = os.path.abspath(os.path.dirname(__file__))
root = os.environ.get("ENVCHECK_PYZ_ROOT") or os.path.join(
    os.path.expanduser("~"), ".cache", "envcheck-pyz")
target = os.path.join(root, BUILD)
if not os.path.isdir(target):
    os.makedirs(root, exist_ok=True)
    partial = "%s.%d" % (target, os.getpid())
    with zipfile.ZipFile(archive) as z:
        z.extractall(partial)
    try:
        os.rename(partial, target)
    except OSError:  # another process unpacked the same build first
        import shutil
        shutil.rmtree(partial, ignore_errors=True)
sys.path[:] = [os.path.join(target, "site")] + [p for p in sys.path if p != archive]
from envcheck.cli import entry
entry()
'''


def _copy_distribution(name, required, site):
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        if required:
            sys.exit("build_zipapp: %s is not installed here: pip install -e '.[test]' "
                     "first" % name)
        return None
    files = [str(f) for f in dist.files or []]
    for f in dist.files or []:
        parts = f.parts
        if ".." in parts or "__pycache__" in parts or parts[0] in ("bin", "Scripts"):
            continue
        if str(f).endswith((".so", ".pyd", ".dylib")):
            # A mypyc build (tomli's wheels) keeps every module's source beside its
            # compiled form, and the source runs on any Python: leave the compiled parts
            # out. Anything else compiled cannot run on every node.
            stem = str(f).split(".", 1)[0]
            if "__mypyc" in str(f) or stem + ".py" in files:
                continue
            sys.exit("build_zipapp: %s %s has a compiled part (%s): a single file could "
                     "not run on every node" % (name, dist.version, f))
        src = dist.locate_file(f)
        dst = os.path.join(site, *parts)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst)
    return "%s==%s" % (name, dist.version)


def build(output):
    with tempfile.TemporaryDirectory() as tmp:
        site = os.path.join(tmp, "site")
        shutil.copytree(os.path.join(ROOT, "envcheck"), os.path.join(site, "envcheck"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        pins = [p for p in (_copy_distribution(n, r, site) for n, r in PACKAGES) if p]
        digest = hashlib.sha256()
        for folder, _, names in sorted(os.walk(site)):
            for n in sorted(names):
                with open(os.path.join(folder, n), "rb") as f:
                    digest.update(n.encode() + f.read())
        with open(os.path.join(tmp, "__main__.py"), "w") as f:
            f.write("BUILD = %r\n" % digest.hexdigest()[:16] + MAIN)
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        zipapp.create_archive(tmp, output, interpreter="/usr/bin/env python3",
                              compressed=True)
    return pins


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "dist", "envcheck.pyz"))
    args = ap.parse_args()
    pins = build(args.output)
    print("built %s (%d KiB): envcheck and %s" % (args.output,
                                                   os.path.getsize(args.output) // 1024,
                                                   " ".join(pins)))


if __name__ == "__main__":
    main()
