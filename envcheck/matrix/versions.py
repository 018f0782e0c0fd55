"""How a torch build is named, and how the matrix's version ranges match it.

A torch build is a version plus a *variant*: ``2.4.1+cu124`` is 2.4.1 built for CUDA
12.4, ``2.4.1+cpu`` has no CUDA, and plain ``2.4.1`` from PyPI is the release's default
variant (cu121 for 2.4). Ranges in the matrix are packaging ``SpecifierSet``s over the
*version*; the variant is matched separately (``cuda`` / ``variants`` conditions).

Two PEP 440 rules would surprise a user, so the matrix bends them deliberately:

- Local tags are not part of the version: ``2.4.1+cu124`` matches ``==2.4.1`` and
  ``<2.5`` exactly like ``2.4.1``; the tag only selects the variant.
- A nightly or release candidate counts as the release it leads to: ``2.6.0.dev20241001``
  and ``2.6.0rc1`` match ``>=2.6`` and not ``<2.6`` (plain PEP 440 matches neither:
  ``"2.6.0.dev1" in SpecifierSet(">=2.5,<2.6")`` is False). The nightly is the 2.6 code
  base, so 2.6's known issues are the best guess for it. A range that names a
  pre-release itself (``>=2.6.0.dev20241015``) opts out: it is matched against the full
  version, so an expectation can pin the nightly that fixed something.
"""

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

_VARIANT = re.compile(r"^(cpu|cu\d{3}|rocm\d+(\.\d+)*)$")
_CUDA = re.compile(r"^\d+\.\d+$")
_DRIVER = re.compile(r"^\d+(\.\d+){0,3}$")


def parse_version(text):
    """A ``Version``; ValueError quoting the text when it is not PEP 440."""
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        raise ValueError("%r is not a version" % text) from None


def parse_specifier(text):
    try:
        return SpecifierSet(str(text))
    except InvalidSpecifier:
        raise ValueError("%r is not a version range (packaging SpecifierSet, e.g. "
                         "'>=2.1,<2.4')" % text) from None


def names_prerelease(spec):
    """True when a range mentions a pre-release, so it is matched as PEP 440 says."""
    for s in spec:
        try:
            if Version(s.version.rstrip(".*")).is_prerelease:
                return True
        except InvalidVersion:
            continue
    return False


def torch_in(spec, version):
    """Whether a torch version (local tag, nightly and all) falls in a matrix range."""
    version = parse_version(version) if not isinstance(version, Version) else version
    public = Version(version.public)
    if names_prerelease(spec):
        return spec.contains(public, prereleases=True)
    # Nightlies and rcs are judged as the release they lead to (see module docstring).
    return spec.contains(Version(public.base_version), prereleases=True)


def series(version):
    """'2.4' for 2.4.1, 2.4.1+cu124 and 2.4.0.dev20240601."""
    version = parse_version(version) if not isinstance(version, Version) else version
    release = version.release + (0,)
    return "%d.%d" % release[:2]


def local_variant(version):
    """The variant a local tag names ('cu124', 'cpu', 'rocm6.1'), or None."""
    version = parse_version(version) if not isinstance(version, Version) else version
    local = version.local
    if local and _VARIANT.match(local):
        return local
    return None


def variant_for_cuda(cuda):
    """'cu124' for CUDA '12.4' (or '12.4.1'); 'cpu' for None, '', 'cpu' or 'none'."""
    if cuda in (None, "", "cpu", "none"):
        return "cpu"
    parts = str(cuda).strip().split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ValueError("CUDA %r: give major.minor, e.g. 12.4 (or cpu)" % cuda)
    return "cu%d%d" % (int(parts[0]), int(parts[1]))


def observed_variant(torch_version, cuda=None, hip=None):
    """The variant of a torch that ran: its local tag, else what torch.version says."""
    tagged = local_variant(torch_version)
    if tagged:
        return tagged
    if hip:
        return "rocm" + ".".join(str(hip).split(".")[:2])
    return variant_for_cuda(cuda)


def is_variant(name):
    return bool(_VARIANT.match(str(name)))


def parse_cuda(text):
    """'12.4' → Version('12.4'); ValueError otherwise."""
    if not _CUDA.match(str(text).strip()):
        raise ValueError("%r is not a CUDA version (major.minor, e.g. 12.4)" % text)
    return Version(str(text))


def driver_tuple(text):
    """'535.104.05' → (535, 104, 5); ValueError for anything else."""
    text = str(text).strip()
    if not _DRIVER.match(text):
        raise ValueError("%r is not an NVIDIA driver version (e.g. 535.104.05)" % text)
    return tuple(int(p) for p in text.split("."))


def python_series(text):
    """'3.11.7' → '3.11'; '3.13t' stays '3.13t' (free-threaded build)."""
    text = str(text).strip()
    m = re.match(r"^(\d+)\.(\d+)(?:\.\d+)?(t?)$", text)
    if not m:
        raise ValueError("%r is not a Python version (e.g. 3.11 or 3.13t)" % text)
    return "%s.%s%s" % m.groups()


def sm_tuple(sm):
    """'sm_86' → (8, 6); 'sm_100' → (10, 0); 'compute_90' → (9, 0)."""
    digits = re.sub(r"[^0-9]", "", sm.split("_", 1)[-1])
    return int(digits[:-1]), int(digits[-1])
