"""The report: pure data, built once by a run, read by every renderer.

It round-trips through JSON (``to_dict`` / ``from_dict``), so ``envcheck report FILE``
renders a saved report exactly as the run did. The JSON layout is versioned by
``SCHEMA_VERSION`` and described by ``schema/report.schema.json``; version 2 added the
``answer`` (exit code and the one-line answer) and the verdict counts in ``summary``.
Version 1 reports still load.
"""

import dataclasses
import json
import math
import os

from ..core import limits
from ..core.errors import UsageError
from ..core.outcomes import Outcome, Verdict

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "schema", "report.schema.json")


@dataclasses.dataclass
class CheckResult:
    probe: str
    check: str
    outcome: str
    seconds: float = None
    detail: str = ""
    advice: str = None
    error: dict = None  # {type, message, traceback} from the root-cause rank
    root_rank: int = None
    ranks: dict = dataclasses.field(default_factory=dict)  # "rank" -> per-rank detail
    verdict: str = None  # set by the matrix (envcheck.verdicts)
    expectation: dict = None  # the matrix entry the verdict came from
    # a failure no expectation explains, matched against the matrix's failure
    # signatures (explain.diagnose): {signature, cause, advice, sources, line, ...}
    diagnosis: dict = None

    @property
    def id(self):
        return "%s.%s" % (self.probe, self.check)

    def to_dict(self):
        d = _plain(self)
        d["id"] = self.id
        return d


def _plain(value, skip=()):
    """``value`` as JSON-like dicts and lists of its own (no list or dict shared with the
    report). ``dataclasses.asdict`` does the same through ``copy.deepcopy`` of every leaf:
    a third of the time envcheck spends after the ranks end, on a report of 40 checks."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in skip}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


# What a saved report must hold, by type: `envcheck report` reads files from anywhere.
_TOP_TYPES = {"envcheck_version": str, "created": str, "plan": dict, "environment": dict,
              "ranks": list, "checks": list, "attempts": list, "matrix": dict,
              "interrupted": str, "strict": bool}
_CHECK_TYPES = {"probe": str, "check": str, "detail": str, "advice": str, "error": dict,
                "ranks": dict, "verdict": str, "expectation": dict, "root_rank": int,
                "diagnosis": dict}


@dataclasses.dataclass
class Report:
    envcheck_version: str
    created: str
    plan: dict
    environment: dict
    ranks: list
    checks: list
    duration_s: float
    interrupted: str = None  # SIGINT / SIGTERM / SIGHUP when the run was cut short
    attempts: list = dataclasses.field(default_factory=list)
    matrix: dict = None  # which matrix files judged this report
    schema_version: int = SCHEMA_VERSION
    strict: bool = False  # judged with --strict (known issues fail): what ``answer`` says

    def summary(self):
        """Outcomes (what happened) and, beside them, verdicts (what that means): a
        healthy node has failed checks that are all known torch pitfalls."""
        counts = {o.value: 0 for o in Outcome}
        judged = {v.value: 0 for v in Verdict}
        unjudged = 0
        for c in self.checks:
            counts[c.outcome] += 1
            if c.verdict in judged:
                judged[c.verdict] += 1
            else:
                unjudged += 1
        counts["verdicts"] = dict(judged, none=unjudged)
        return counts

    def answer(self):
        """{exit_code, ready, text, strict}: what ``envcheck run`` exits with and the
        first line of its screen, as the JSON's first key."""
        from ..render.table import answer  # the screen's own words (table imports this module)

        return answer(self, self.strict)

    def to_dict(self):
        d = _plain(self, skip=("checks",))
        d["schema_version"] = SCHEMA_VERSION
        d["checks"] = [c.to_dict() for c in self.checks]
        d["summary"] = self.summary()
        d["answer"] = self.answer()
        from .model_answer import answer as model_answer

        model = model_answer(self)
        if model is not None:  # with --model: what the user's model can and cannot do
            d["model"] = model
        return d

    @classmethod
    def from_dict(cls, data):
        """Rebuild a report from its JSON; ValueError names what is wrong."""
        if not isinstance(data, dict):
            raise ValueError("top level is %s, not an object" % type(data).__name__)
        version = data.get("schema_version")
        if version not in READABLE_VERSIONS:
            raise ValueError("schema_version is %r; this envcheck reads versions %s"
                             % (version, ", ".join(map(str, READABLE_VERSIONS))))
        fields = {f.name for f in dataclasses.fields(cls)}
        required = {f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING}
        missing = sorted(required - set(data))
        if missing:
            raise ValueError("missing %s" % ", ".join(missing))
        for name, kind in _TOP_TYPES.items():
            if data.get(name) is not None and not isinstance(data[name], kind):
                raise ValueError("%s is %s, not %s" % (name, type(data[name]).__name__,
                                                       kind.__name__))
        if not all(isinstance(r, dict) for r in data["ranks"]):
            raise ValueError("ranks holds something that is not an object")
        check_fields = {f.name for f in dataclasses.fields(CheckResult)}
        checks = []
        for i, c in enumerate(data["checks"]):
            if not isinstance(c, dict) or not {"probe", "check", "outcome"} <= set(c):
                raise ValueError("checks[%d] lacks probe, check or outcome" % i)
            if c["outcome"] not in {o.value for o in Outcome}:
                raise ValueError("checks[%d] has unknown outcome %r" % (i, c["outcome"]))
            for name, kind in _CHECK_TYPES.items():
                if c.get(name) is not None and not isinstance(c[name], kind):
                    raise ValueError("checks[%d].%s is %s, not %s" % (
                        i, name, type(c[name]).__name__, kind.__name__))
            if not all(isinstance(e, dict) for e in (c.get("ranks") or {}).values()):
                raise ValueError("checks[%d].ranks holds something that is not an object" % i)
            checks.append(CheckResult(**{k: v for k, v in c.items() if k in check_fields}))
        kwargs = {k: v for k, v in data.items() if k in fields}
        kwargs["checks"] = checks
        return cls(**kwargs)


def jsonable(value):
    """Any value a rank produced, as strict JSON takes it: NaN and infinities become the
    strings "NaN", "Infinity", "-Infinity" (strict parsers reject the bare words), and
    text that is not valid Unicode (bytes from a non-UTF-8 path, decoded with surrogate
    escapes) keeps its bytes as backslash escapes instead of breaking the encoder."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {jsonable(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def dumps(report):
    return json.dumps(jsonable(report.to_dict()), indent=2, sort_keys=True,
                      ensure_ascii=False, allow_nan=False) + "\n"


def check_writable(path):
    """Fail before the run, not after it, when PATH cannot be written."""
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise UsageError("%s is a directory; give a file name" % path)
    if not os.path.isdir(directory):
        raise UsageError("cannot write %s: directory %s does not exist" % (path, directory))
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError("cannot write %s: directory %s is not writable" % (path, directory))
    if os.path.exists(path) and not os.path.isfile(path):
        # The report replaces the path with a new file (written beside it, then renamed):
        # over a FIFO or a device (/dev/null, /dev/full) that would replace the node.
        raise UsageError("cannot write %s: not a regular file (reports are written "
                         "atomically, as a new file renamed over the path)" % path)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UsageError("cannot write %s: the file is read-only" % path)


def load(path):
    try:
        data = json.loads(limits.read_input(path).decode("utf-8"))
    except limits.InputError as exc:
        raise UsageError("%s: %s" % (path, exc)) from None
    except FileNotFoundError:
        raise UsageError("%s: no such file" % path) from None
    except IsADirectoryError:
        raise UsageError("%s is a directory, not a report" % path) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError("%s is not a JSON report: %s" % (path, exc)) from None
    except RecursionError:
        raise UsageError("%s is not an envcheck report: nested too deeply to read" % path) \
            from None
    except OSError as exc:
        raise UsageError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind == "envcheck-check":
        raise UsageError("%s is an 'envcheck check' answer, not a run report: show it "
                         "with envcheck summary %s" % (path, path))
    if kind == "envcheck-summary":
        raise UsageError("%s is a summary ('envcheck summary --json'), not a run report: "
                         "run envcheck summary on the answers it was made of" % path)
    try:
        return Report.from_dict(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise UsageError("%s is not an envcheck report: %s" % (path, exc)) from None
