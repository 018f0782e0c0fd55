"""explain.prefilter: the words a pattern requires, and the signatures a line can match.

The index may only skip a signature that cannot match: every pattern of every signature
is searched in every line of both corpora (real logs), and in each line cased three ways,
and each match must be one of the line's candidates. The matcher with the index gives
the same findings, line by line, as the matcher trying every signature."""

import os
import re

import pytest

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

from envcheck.explain import line, match, prefilter
from envcheck.matrix import load as matrix_load

HERE = os.path.dirname(os.path.abspath(__file__))


def _texts():
    out = []
    for name in ("explain_corpus.toml", "explain_unseen.toml"):
        with open(os.path.join(HERE, "data", name), "rb") as f:
            out += [e["text"] for e in tomllib.load(f)["entry"]]
    return out


TEXTS = _texts()


@pytest.fixture(scope="module")
def signatures():
    return matrix_load.load().signatures


@pytest.fixture(scope="module")
def matcher(signatures):
    return match.Matcher(signatures)


@pytest.mark.parametrize("pattern, expected", [
    # a word with a non-word character of the literal on both sides
    (r"Connect to \S+ (?:failed|returned)", ("word", "to")),
    # the longest of several; case folded
    (r"NCCL WARN socket(?:Start|Poll)Connect: exceeded (?:retries|timeouts)",
     ("word", "exceeded")),
    # a literal's first and last words may run on in the line: a substring, not a word
    (r"cudaErrorNoDevice\b", ("substring", "cudaerrornodevice")),
    # an optional group's words are not required; the literal after it is
    (r"(?:Some words here )?EADDRINUSE", ("substring", "eaddrinuse")),
    (r"(?:optional words )*RendezvousTimeoutError", ("substring", "rendezvoustimeouterror")),
    # a group at the top level, and a repeat of at least one, are required
    (r"x(?:the needed word )y", ("word", "needed")),
    (r"(?:a repeated word )+z", ("word", "repeated")),
    # alternatives: neither is required
    (r"(?:first alternative|second alternative)", None),
    # a character class breaks a literal: '[Ff]ailed' requires 'ailed', not 'failed'
    (r"[Ff]ailed to recv", ("word", "to")),
    # a non-ASCII literal is never a key (re's case folding is not str.lower's)
    (r"(?i)\u212aill", ("substring", "ill")),
    # nothing of three characters or more
    (r"^\d+:\s\d$", None),
])
def test_key(pattern, expected):
    assert prefilter.key(re.compile(pattern)) == expected


def test_a_word_is_looked_up_whole():
    index = prefilter.Index([(re.compile(r"Connect to \S+ failed"),),
                             (re.compile(r"the peer closed it"),)])
    assert index.candidates("connect to 10.0.0.1<1234> failed") == {0}
    assert index.candidates("Connect TO host failed") == {0}
    # 'closed' inside 'unclosed' is not the word: pattern 1 cannot match this line anyway
    assert index.candidates("the peer unclosed it") == set()
    assert index.candidates("so the peer closed it") == {1}


def test_a_line_that_is_not_ascii_is_tried_against_every_entry():
    index = prefilter.Index([(re.compile(r"(?i)kill event"),)])
    # the Kelvin sign matches 'k' under re.IGNORECASE, not under str.lower
    assert re.compile(r"(?i)kill event").search("\u212aill event")
    assert index.candidates("\u212aill event") is None


def test_every_match_in_the_corpora_is_a_candidate(matcher):
    kinds = {0: "match/line_match", 1: "weak_match", 2: "alone_match", 3: "differ",
             4: "differ_match"}
    lines = {ln.strip() for text in TEXTS for ln in text.splitlines() if ln.strip()}
    lines |= {line.parse(1, ln.encode()).text for ln in lines}
    lines |= {v for ln in lines for v in (ln.upper(), ln.lower(), ln.swapcase())}
    missed, matched = [], set()
    for text in lines:
        found = matcher.index.candidates(text)
        for n, (kind, s) in enumerate(matcher.entries):
            if any(p.search(text) for p in matcher.patterns(n)):
                matched.add(n)
                if found is not None and n not in found:
                    missed.append((s.id, kinds[kind], text))
    assert missed == []
    # the corpora exercise most entries: a check of a handful would say little
    assert len(matched) >= 0.8 * len(matcher.entries)


def _feed_all(matcher, texts, every):
    if every:
        matcher.index.candidates = lambda text: None
    taken = []
    for number, text in enumerate(texts, 1):
        s = matcher.feed(line.parse(number, text.encode()), "job.log")
        taken.append(s and s.id)
    findings, consequences = matcher.results()
    return (taken, [(f.signature.id, f.count, sorted(f.ranks)) for f in findings],
            [f.signature.id for f in consequences])


@pytest.mark.parametrize("text", TEXTS[::7], ids=["text%d" % (7 * i) for i in
                                                    range(len(TEXTS[::7]))])
def test_the_index_changes_no_finding(text, signatures):
    texts = text.splitlines()
    assert (_feed_all(match.Matcher(signatures), texts, every=False)
            == _feed_all(match.Matcher(signatures), texts, every=True))
