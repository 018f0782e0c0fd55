"""Which signatures a line can match at all, from the words their patterns require.

A log line that holds a scan word is tried against every signature's patterns, about
four hundred searches. Where every line is a hit (NCCL_DEBUG=INFO output: each line
holds "NCCL"), that was 80 µs a line, 300,000 lines in 25 s (issue #34). Most patterns
require a literal the line must hold: ``Connect to \\S+ (?:failed|returned)`` cannot
match a line without the word "connect". So each pattern is read once, with ``re``'s own
parser, for a literal it cannot match without:

- a *word*: a run of ``[a-z0-9_]`` inside a literal, with a non-word character of the
  same literal on both sides (``to`` in ``Connect to ``): any line the pattern matches
  holds it as a whole word. A line's words come from one ``findall``, and each is looked
  up in a dict of the patterns that require it;
- else a *substring*: the pattern's longest literal (``cudaErrorNoDevice``), tested with
  ``in``;
- else nothing: the pattern is tried on every line.

Case is folded on both sides (a pattern with ``(?i)`` or without it), and only ASCII
literals are read: a line that is not ASCII is tried against every pattern, as re's
case folding of other scripts (the Kelvin sign for ``k``) is not str.lower's. The index
says which signatures to try; the patterns still decide. A pattern the index reads
wrong would lose a match, so tests/test_explain_prefilter.py checks every signature's
patterns against every line of both corpora: each match is a candidate.
"""

import re

try:  # Python >= 3.11; sre_parse before, deprecated since
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
    from re import _constants as _sre
except ImportError:  # pragma: no cover - Python 3.9 and 3.10
    import sre_parse as _sre_parse  # type: ignore[no-redef]
    import sre_constants as _sre  # type: ignore[no-redef]

WORD = re.compile(r"[a-z0-9_]+")
_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT) + (
    (_sre.POSSESSIVE_REPEAT,) if hasattr(_sre, "POSSESSIVE_REPEAT") else ())


def _runs(items, out):
    """Append to ``out`` the literal runs (lower-case ASCII strings) that every match of
    the parsed sequence ``items`` holds: consecutive literals at its top level, and those
    of a group or a repeat of at least one that it holds."""
    run = []
    for op, av in items:
        if op is _sre.LITERAL and av < 128:
            run.append(chr(av).lower())
            continue
        if run:
            out.append("".join(run))
            run = []
        if op is _sre.SUBPATTERN:
            _runs(av[-1], out)
        elif op in _REPEATS and av[0] >= 1:
            _runs(av[2], out)
    if run:
        out.append("".join(run))


def key(pattern):
    """What a line must hold for ``pattern`` (compiled) to match it: ("word", w),
    ("substring", s), or None (nothing known: try it on every line)."""
    runs = []
    _runs(_sre_parse.parse(pattern.pattern, pattern.flags), runs)
    words = [m.group() for lit in runs for m in WORD.finditer(lit)
             if m.start() > 0 and m.end() < len(lit)]
    if words:
        return ("word", max(words, key=len))
    longest = max(runs, key=len, default="")
    if len(longest) >= 3:
        return ("substring", longest)
    return None


class Index:
    """Candidates for a line among ``entries`` (a list of pattern tuples, one per
    entry): ``candidates(text)`` is the set of entry numbers whose patterns the line may
    match, or None where every entry must be tried."""

    def __init__(self, entries):
        self.words = {}  # word -> entry numbers
        substrings = {}  # substring -> entry numbers
        always = set()
        for n, patterns in enumerate(entries):
            for p in patterns:
                k = key(p)
                if k is None:
                    always.add(n)
                else:
                    table = self.words if k[0] == "word" else substrings
                    table.setdefault(k[1], set()).add(n)
        self.always = frozenset(always)
        # substrings under their first three characters, each tested once: most lines
        # hold none of the few prefixes (the CUDA error names share "cud"); 12% of the
        # index's time on NCCL INFO lines against testing each substring
        prefixes = {}
        for s, n in substrings.items():
            prefixes.setdefault(s[:3], []).append((s, n))
        self.prefixes = tuple((p, tuple(items)) for p, items in prefixes.items())

    def candidates(self, text):
        if not text.isascii():
            return None
        low = text.lower()
        found = set(self.always)
        words = self.words
        for w in set(WORD.findall(low)):
            n = words.get(w)
            if n:
                found |= n
        for p, items in self.prefixes:
            if p in low:
                for s, n in items:
                    if s in low:
                        found |= n
        return found
