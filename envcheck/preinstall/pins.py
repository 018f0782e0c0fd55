"""Which torch a user means: a requirement string, or the torch line of requirements.txt.

``torch==2.4.1+cu124`` names a build; ``torch==2.4.1`` the default PyPI build;
a range (``torch>=2.1,<2.5``) is resolved later to the newest release the matrix knows
in it. In a requirements file, ``--index-url``/``--extra-index-url`` pointing at
``download.pytorch.org/whl/cuXYZ`` selects that variant, as it would for pip; ``-r``
includes are followed; a line whose environment marker is false here is ignored.
"""

import dataclasses
import os
import re
import urllib.parse
from typing import Optional

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ..matrix import versions
from ..core import limits
from ..core.errors import UsageError

_INDEX = re.compile(r"download\.pytorch\.org/whl/(?:(?:nightly|test)/)?(cpu|cu\d{3}|rocm[\d.]+)")


@dataclasses.dataclass(frozen=True)
class Pin:
    text: str  # as the user wrote it
    specifier: SpecifierSet
    variant: Optional[str] = None  # from a local tag or an index URL
    where: str = ""  # "requirements.txt:3" when read from a file

    @property
    def exact(self):
        """The pinned version string when the specifier is one == / ===, else None."""
        specs = list(self.specifier)
        if len(specs) == 1 and specs[0].operator in ("==", "===") \
                and not specs[0].version.endswith(".*"):
            return specs[0].version
        return None


def _shorten(text, limit=80):
    return text if len(text) <= limit else text[:limit - 1] + "…"


def parse(text, where="", index_variant=None):
    label = where or "requirement"
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError("%s %r is not a requirement: %s (write e.g. torch==2.4.1+cu124)"
                         % (label, text, exc)) from None
    if req.name.lower() != "torch":
        raise UsageError("%s %r names %s, not torch" % (label, text, req.name))
    spec = req.specifier
    if req.url:
        spec = _spec_from_url(req.url, label)
    if not list(spec):
        raise UsageError("%s %r pins no version: write torch==VERSION" % (label, text))
    for s in spec:
        bad = None
        if s.operator == "===":
            bad = "arbitrary equality (===) names no release"
        elif len(s.version) > 64:
            bad = "a version of %d characters is not a torch release" % len(s.version)
        else:
            try:
                versions.parse_version(s.version.rstrip(".*"))
            except ValueError as exc:
                bad = str(exc)
        if bad:
            raise UsageError("%s %r: %s (write e.g. torch==2.4.1+cu124)"
                             % (label, _shorten(text), bad))
    variant = None
    for s in spec:
        try:
            tagged = versions.local_variant(s.version.rstrip(".*"))
        except ValueError:
            tagged = None
        if tagged:
            variant = tagged
    if variant and index_variant and variant != index_variant:
        raise UsageError("%s %r asks for +%s but its index URL serves %s"
                         % (label, text, variant, index_variant))
    return Pin(text, spec, variant or index_variant, where)


def _spec_from_url(url, label):
    name = urllib.parse.unquote(url.rsplit("/", 1)[-1].split("#")[0])
    try:
        _, version, _, _ = parse_wheel_filename(name)
    except InvalidWheelFilename:
        raise UsageError("%s: %s is not a torch wheel URL" % (label, url)) from None
    return SpecifierSet("==%s" % version)


def _logical_lines(path):
    # utf-8-sig: a file saved by an editor that writes a BOM must not hide its first line.
    raw = limits.read_input(path, 16 << 20).decode("utf-8-sig").splitlines()
    buf, start = "", None
    for n, line in enumerate(raw, 1):
        if start is None:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        yield start, buf + line
        buf, start = "", None
    if buf:
        yield start, buf


def _collect(path, seen):
    """[(Pin, index variant of its file)] of a file and the files it includes."""
    real = os.path.realpath(path)
    if real in seen:
        return []
    seen.add(real)
    try:
        lines = list(_logical_lines(path))
    except FileNotFoundError:
        raise UsageError("-r %s: no such file" % path) from None
    except (OSError, UnicodeDecodeError, limits.InputError) as exc:
        raise UsageError("-r %s: cannot read it (%s)" % (path, exc)) from None
    index_variant, mine, included = None, [], []
    for n, line in lines:
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not line:
            continue
        opt = re.match(r"^(-i|--index-url|--extra-index-url)[\s=]+(\S+)", line)
        if opt:
            m = _INDEX.search(opt.group(2))
            index_variant = m.group(1) if m else index_variant
            continue
        inc = re.match(r"^(-r|--requirement)[\s=]+(\S+)", line)
        if inc:
            included += _collect(os.path.join(os.path.dirname(path), inc.group(2)), seen)
            continue
        name = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)", line)
        if line.startswith("-") or not name or name.group(1).lower() != "torch":
            continue  # other pip options (-c, -f, --hash ...) and other packages
        # pip-compile writes per-requirement options (--hash=sha256:...) after the pin.
        line = re.split(r"\s+--?[A-Za-z]", line, maxsplit=1)[0].strip()
        try:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate():
                continue
        except (InvalidRequirement, UndefinedEnvironmentName):
            pass  # parse() reports it with its line
        mine.append(parse(line, "%s:%d" % (path, n)))
    # An index URL anywhere in a file applies to that file's requirements, as for pip.
    return [(pin, index_variant) for pin in mine] + included


def from_file(path):
    """The one torch Pin in a requirements file (following -r includes)."""
    pins = []
    for pin, index_variant in _collect(path, set()):
        if index_variant and pin.variant and pin.variant != index_variant:
            raise UsageError("%s %r asks for +%s but the file's index URL serves %s"
                             % (pin.where, pin.text, pin.variant, index_variant))
        pins.append(dataclasses.replace(pin, variant=pin.variant or index_variant))
    if not pins:
        raise UsageError("-r %s: no torch requirement in it" % path)
    if len(pins) > 1:
        raise UsageError("-r %s: torch is required more than once (%s)"
                         % (path, ", ".join(p.where for p in pins)))
    return pins[0]
