"""Does `envcheck check` pick the torch release pip would install? Ask pip itself.

For each node/range combination below, runs

    pip install --dry-run --report - --only-binary=:all: --ignore-installed --target T
        --python-version X.Y --implementation cp --abi cpXY[t] --platform ... 'torch RANGE'

and compares the version pip would install with envcheck's choice
(``envcheck.preinstall.resolve``). pip reads no index here: this machine has no network,
so the indexes are local ``--find-links`` directories of stub wheels whose *file names*
are the published ones the matrix describes (per patch: its Python tags, its manylinux
tag; one directory per index: PyPI's plain versions, download.pytorch.org/whl/cuXYZ's
``+cuXYZ`` ones). What is compared is therefore the resolver (tags, ABI, glibc, version
order across indexes), not the matrix's facts, which carry their own sources. The
``--platform`` flags are the manylinux tags pip computes for that glibc on a real node
(PEP 600: manylinux_2_G down to manylinux_2_5, with their legacy aliases).

Environment markers are not compared: pip evaluates them for the interpreter it runs
under even with --python-version, which is why envcheck evaluates them for the node.

    python dev/pip_agree.py            # the table; exit 1 if any row disagrees
    python dev/pip_agree.py --keep DIR # keep the stub indexes in DIR
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from packaging.specifiers import SpecifierSet  # noqa: E402

from envcheck.matrix.load import load  # noqa: E402
from envcheck.preinstall import resolve  # noqa: E402
from envcheck.preinstall.node import Node  # noqa: E402
from envcheck.preinstall.pins import PYPI  # noqa: E402

# (range, node Python, node glibc, indexes): indexes as envcheck names them
CASES = [
    (">=2.0", "3.11", "2.35", (PYPI,)),
    (">=2.0", "3.11", "2.17", (PYPI,)),
    (">=2.0", "3.10", "2.35", (PYPI,)),
    (">=2.0", "3.10", "2.17", (PYPI,)),
    ("<2.5", "3.13", "2.35", (PYPI,)),
    (">=2.3,<2.6", "3.13", "2.35", (PYPI,)),
    (">=2.0", "3.15", "2.35", (PYPI,)),
    (">=2.0", "3.8", "2.35", (PYPI,)),
    (">=1.13", "3.7", "2.17", (PYPI,)),
    ("<2.0", "3.11", "2.12", (PYPI,)),
    (">=2.12", "3.13t", "2.35", (PYPI,)),
    (">=2.6,<2.7", "3.13t", "2.35", (PYPI,)),
    (">=2.7,<2.8", "3.13t", "2.35", (PYPI,)),
    (">=2.0", "3.14t", "2.35", (PYPI,)),
    (">=2.5", "3.13t", "2.17", (PYPI,)),
    ("==2.4", "3.11", "2.35", (PYPI,)),
    ("~=2.4.0", "3.12", "2.35", (PYPI,)),
    ("==2.4.1", "3.11", "2.35", (PYPI, "cu118")),
    (">=2.0", "3.11", "2.35", (PYPI, "cu118")),
    (">=2.0", "3.11", "2.35", ("cu118",)),
    ("==2.6.0", "3.11", "2.17", ("cu126",)),
    (">=2.5", "3.12", "2.17", ("cu126",)),
]


def _stub(path, version, tag):
    """A wheel pip can read the metadata of: METADATA, WHEEL, RECORD."""
    info = "torch-%s.dist-info" % version
    files = {
        "%s/METADATA" % info: "Metadata-Version: 2.1\nName: torch\nVersion: %s\n" % version,
        "%s/WHEEL" % info: "Wheel-Version: 1.0\nGenerator: envcheck-dev\n"
                           "Root-Is-Purelib: false\nTag: %s\n" % tag,
    }
    files["%s/RECORD" % info] = "".join("%s,,\n" % n for n in list(files) + [
        "%s/RECORD" % info])
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


def build_indexes(matrix, directory, names):
    """One find-links directory per index, with a stub for every wheel file name."""
    out = {}
    for index in names:
        d = os.path.join(directory, index)
        os.makedirs(d, exist_ok=True)
        for release in matrix.releases:
            name = release.default_variant if index == PYPI else index
            variant = release.variant(name)
            if variant is None:
                continue
            for patch in release.patches:
                version = patch if index == PYPI else "%s+%s" % (patch, name)
                for tag in resolve.wheel_tags(release, patch, variant):
                    _stub(os.path.join(d, "torch-%s-%s.whl" % (version, tag)), version, tag)
        out[index] = d
    return out


def pip_choice(spec, python, glibc, dirs):
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-",
           "--no-index", "--only-binary=:all:", "--ignore-installed",
           "--disable-pip-version-check", "--python-version", python.rstrip("t"),
           "--implementation", "cp", "--abi", resolve.abi_tag(python),
           # pip before 23.3 takes --platform/--abi only with --target (nothing is written)
           "--target", os.path.join(os.path.dirname(dirs[0]), "target")]
    for d in dirs:
        cmd += ["--find-links", d]
    for p in resolve.node_platforms(glibc):
        cmd += ["--platform", p]
    cmd.append("torch%s" % spec)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        if "No matching distribution" in done.stderr:
            return None
        raise RuntimeError("pip failed: %s\n%s" % (" ".join(cmd), done.stderr))
    report = json.loads(done.stdout)
    return next(i["metadata"]["version"] for i in report["install"]
                if i["metadata"]["name"] == "torch")


def envcheck_choice(matrix, spec, python, glibc, indexes):
    node = Node(python, python, "Linux", "x86_64", glibc, None, ())
    res = resolve.resolve(matrix, SpecifierSet(spec), indexes, node)
    return None if res is None or res.chosen is None else str(res.chosen.version)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", metavar="DIR", help="build the stub indexes here and keep them")
    args = ap.parse_args(argv)
    matrix = load()
    names = sorted({i for *_, indexes in CASES for i in indexes})
    with tempfile.TemporaryDirectory() as tmp:
        dirs = build_indexes(matrix, args.keep or tmp, names)
        rows, bad = [], 0
        for spec, python, glibc, indexes in CASES:
            theirs = pip_choice(spec, python, glibc, [dirs[i] for i in indexes])
            ours = envcheck_choice(matrix, spec, python, glibc, indexes)
            same = theirs == ours
            bad += not same
            rows.append((spec, python, glibc, " + ".join(
                "PyPI" if i == PYPI else i for i in indexes), theirs or "(none)",
                ours or "(none)", "yes" if same else "**NO**"))
    print("| range | Python | glibc | indexes | pip installs | envcheck picks | agree |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print("| torch%s | %s | %s | %s | %s | %s | %s |" % row)
    print("\n%d of %d combinations agree (pip %s)" % (
        len(rows) - bad, len(rows), subprocess.run(
            [sys.executable, "-m", "pip", "--version"], capture_output=True,
            text=True).stdout.split()[1]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
