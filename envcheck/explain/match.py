"""Log lines against the matrix's failure signatures, into findings: one per cause.

A line is matched by the first signature (in matrix file order) one of whose patterns
it holds. The same cause on many ranks, or repeated for hours, is one finding: its
ranks and hosts, how many lines showed it, and the first of them.

Some kinds of signature behave differently:

- ``symptom``: usually the consequence of another failure (a watchdog timeout, a peer
  that exited, torchrun's summary). With a cause found they are its consequences (the
  root cause is the earliest real failure); alone, the most specific of them, in matrix
  order (NCCL's timeout before torchrun's summary of the abort it caused), is the
  finding, and the others its consequences.
- ``differ``: fires when its pattern's first group differs between ranks or hosts
  (NCCL versions); the same value everywhere is no finding. A signature's
  ``differ_match`` patterns are read the same way between ranks only (lines whose rank
  the log does not say are not compared), within one ``scope`` group where the pattern
  has one: two ranks whose timed-out collectives on one process group have different
  sequence numbers or operations (``torch.collective_mismatch``).
- ``needs``: fires only when one of the signatures it names fired too (P2P transport
  lines are normal; with a collective timeout they are the likely cause). A signature's
  ``weak_match`` patterns are read the same way, with ``weak_needs``: a line that only a
  failing job's other lines make a cause (torch's loopback fallback when the host name
  does not resolve, then a failed connect), where its ``match`` patterns are the cause
  wherever they show. Only a line no ``match`` pattern takes is tried against them.
- ``alone_match`` (with ``alone_cause``): lines a working job prints too (NCCL's INFO
  trace of a failed socket call, its init lines and then nothing), or a traceback's
  source line, that name a cause only where the log shows nothing else: no other
  finding, no symptom, no exception line at all (``structure.arrange``). The finding
  then says ``alone_cause``, a guess worded as one ("likely", "possibly"); a ``needs``
  signature whose needs did not fire is read the same way where it has an
  ``alone_cause``. Its ``alone_unless`` lines show that the job went on past them (NCCL's
  '- Destroy COMPLETE' of the communicator whose init lines they were): where one follows
  the last of them in every file that has them, the guess is not made.
- ``traceback``: patterns read only on an exception line, with its traceback's frames,
  which a rule of ``structure.TRACEBACK_RULES`` judges (a bare command name that
  subprocess did not find on PATH; one installed package calling another's API in a
  shape the installed release lacks); the same words raised in the job's own call stay
  the program's error. The finding's cause ends with what the frames said.
"""

import dataclasses
from typing import Optional

from . import prefilter


@dataclasses.dataclass
class Finding:
    signature: object  # matrix.signatures.Signature
    file: str
    line: object  # explain.line.Line: the first that shows it
    ranks: set = dataclasses.field(default_factory=set)
    hosts: set = dataclasses.field(default_factory=set)
    count: int = 0
    values: Optional[dict] = None  # differ: {value: first "file:line"}
    conditional: bool = False  # from a needs signature or a weak_match line
    alone: bool = False  # only lines a working job prints too, and nothing else found

    @property
    def cause(self):
        """The cause as said for this finding: a guess where it was read alone."""
        if self.alone and self.signature.alone_cause:
            return self.signature.alone_cause
        return self.signature.cause

    @property
    def where(self):
        return "%s:%d" % (self.file, self.line.number)

    def add(self, line):
        self.count += 1
        if line.rank is not None:
            self.ranks.add(line.rank)
        if line.host:
            self.hosts.add(line.host)


class Matcher:
    def __init__(self, signatures):
        self.rank = {s.id: i for i, s in enumerate(signatures)}
        # (a ``traceback`` signature's ``line_match`` is read line by line too)
        self.plain = [s for s in signatures
                      if not s.differ and (not s.traceback or s.line_patterns)]
        # read on an exception line only, with its traceback's frames (feed_exception)
        self.traceback = [s for s in signatures if s.traceback]
        self.weak = [s for s in self.plain if s.weak]
        self.alone = [s for s in self.plain if s.alone]
        # the signatures whose guess the log can take back (alone_unless)
        self.unless = [s for s in self.plain if s.alone_unless]
        self.differ = [s for s in signatures if s.differ]
        self.rank_differ = [s for s in signatures if s.differ_patterns]
        # Which of them a line can match at all, from the words their patterns require
        # (prefilter.py): entries numbered in the order feed tries them. Trying every
        # pattern on every line took 80 µs a line where each is a hit (NCCL INFO output);
        # with the index, 25 (phase U of #34). One search of the union of all patterns
        # (tried in phase T) was slower still: an alternation of a hundred patterns loses
        # each pattern's literal prefix, which re skips ahead on.
        self.entries = ([(0, s) for s in self.plain] + [(1, s) for s in self.weak]
                        + [(2, s) for s in self.alone] + [(3, s) for s in self.differ]
                        + [(4, s) for s in self.rank_differ]
                        + [(5, s) for s in self.unless])
        self.index = prefilter.Index([self.patterns(n) for n in range(len(self.entries))])
        self.every = list(range(len(self.entries)))
        self.found = {}  # signature id -> Finding
        self.weak_found = {}  # signature id -> Finding of its weak_match lines
        self.alone_found = {}  # signature id -> Finding of its alone_match lines
        self.seen = 0  # lines fed so far
        # signature id -> {file: the number of the line fed last} of the lines that make
        # its guess (alone_match, or match where its needs may not fire), and of its
        # alone_unless lines
        self.guess_at, self.unless_at = {}, {}
        self.order = []  # ids in the order first seen
        self.values = {}  # differ signature id -> {who: (value, file, line)}
        self.rank_values = {}  # differ_match id -> {(scope, rank): (value, file, line)}

    def patterns(self, n):
        """The patterns entry ``n`` tries on a line: by its kind, 0 its match (a traceback
        signature's line_match), 1 weak_match, 2 alone_match, 3 its differ, 4 differ_match,
        5 alone_unless."""
        kind, s = self.entries[n]
        return (s.line_patterns if s.traceback else s.patterns, s.weak, s.alone, s.patterns,
                s.differ_patterns, s.alone_unless)[kind]

    def feed(self, line, file):
        """Match one line; returns the signature that matched it, or None. Entries are
        tried in order, only those the index says the line can match: the first
        signature whose patterns hold it (else the first whose weak_match patterns do,
        else alone_match's) takes the line; every differ signature reads it."""
        text = line.text
        self.seen += 1
        found = self.index.candidates(text)
        matched, taken = None, False
        for n in (self.every if found is None else sorted(found)):
            kind, s = self.entries[n]
            if kind <= 2:
                if taken:
                    continue
                if kind == 0 and s.line_search(text):
                    self._record(s, line, file)
                    matched = s
                elif kind == 1 and s.weak_search(text):
                    self._record(s, line, file, self.weak_found)
                    matched = s
                elif kind == 2 and s.alone_search(text):
                    self._record(s, line, file, self.alone_found)
                else:
                    continue
                if kind != 1 and s.alone_unless:
                    self.guess_at.setdefault(s.id, {})[file] = self.seen
                taken = True
            elif kind == 5:
                if s.alone_unless_search(text):
                    self.unless_at.setdefault(s.id, {})[file] = self.seen
            elif kind == 3:
                m = s.search(text)
                if m:
                    who = ("host", line.host) if line.host else ("rank", line.rank)
                    if who[1] is None:
                        who = ("line", "%s:%d" % (file, line.number))
                    self.values.setdefault(s.id, {}).setdefault(
                        who, (m.group(1), file, line))
            elif line.rank is not None:
                m = s.differ_search(text)
                if m:
                    who = (m.groupdict().get("scope"), line.rank)
                    self.rank_values.setdefault(s.id, {}).setdefault(
                        who, (m.group("value"), file, line))
        return matched

    def feed_exception(self, line, file, frames, whole, rules, source=""):
        """An exception line that no signature matched, with its traceback's frames
        (outermost first; ``whole``: the traceback's first line is in the log): the first
        ``traceback`` signature whose pattern it holds and whose rule (``rules[name](match,
        frames, whole, source)``, ``source`` the innermost frame's source line: what the
        frames say, or None) accepts the frames names it, with
        what they say after its cause; returns it, or None."""
        for s in self.traceback:
            m = s.search(line.text)
            said = m and rules[s.traceback](m, frames, whole, source)
            if said:
                if s.id not in self.found:
                    s = dataclasses.replace(s, cause="%s (%s)" % (s.cause, said))
                self._record(s, line, file)
                return s
        return None

    def _record(self, s, line, file, found=None):
        found = self.found if found is None else found
        f = found.get(s.id)
        if f is None:
            f = found[s.id] = Finding(s, file, line)
            if s.id not in self.order:
                self.order.append(s.id)
        f.add(line)

    def _differences(self):
        out = []
        for s in self.differ:
            seen = self.values.get(s.id, {})
            distinct = {v for v, _, _ in seen.values()}
            if len(distinct) < 2:
                continue
            first = {}
            for value, file, line in seen.values():
                first.setdefault(value, (file, line))
            # The line shown is the first that disagrees with the first value seen.
            file, line = list(first.values())[1]
            f = Finding(s, file, line, count=len(seen))
            for _, _, ln in seen.values():
                f.add(ln)
            f.count = len(seen)
            f.values = {v: "%s:%d" % (fl, ln.number) for v, (fl, ln) in first.items()}
            out.append(f)
        for s in self.rank_differ:
            if s.id in self.found:
                continue  # its own words said it
            scopes = {}
            for (scope, _), seen in self.rank_values.get(s.id, {}).items():
                scopes.setdefault(scope, []).append(seen)
            for seen in scopes.values():
                first = {}
                for value, file, line in seen:
                    first.setdefault(value, (file, line))
                if len(first) < 2:
                    continue
                file, line = list(first.values())[1]
                f = Finding(s, file, line)
                for _, _, ln in seen:
                    f.add(ln)
                f.values = {v: "%s:%d" % (fl, ln.number) for v, (fl, ln) in first.items()}
                out.append(f)
                break
        return out

    def results(self):
        """(findings, consequences): root causes in the order seen, and the symptoms;
        with no root cause, the most specific symptom and the others."""
        fired = set(self.found)
        found = []
        alone = []  # read only where nothing else is found
        for i in self.order:
            f = self.found.get(i)
            if f is not None:
                if f.signature.needs:
                    if not fired & set(f.signature.needs):
                        if f.signature.alone_cause:
                            alone.append(f)
                        continue
                    f.conditional = True
                found.append(f)
                continue
            f = self.weak_found.get(i)  # only weak_match lines showed it
            if f is not None and fired & set(f.signature.weak_needs):
                f.conditional = True
                found.append(f)
            elif i in self.alone_found:
                alone.append(self.alone_found[i])
        found += self._differences()
        alone = [f for f in alone if not self._went_on(f.signature.id)]
        if not found and alone:
            lead = alone[0]
            lead.alone = lead.conditional = True
            return [lead], []
        causes = [f for f in found if not f.signature.symptom]
        symptoms = [f for f in found if f.signature.symptom]
        # a symptom that explains a cause found with it takes that cause's place (Slurm's
        # time limit, then the SIGKILL it sent); it stays a symptom for the program's own
        # error (structure.arrange), which comes before it
        promoted = [s for s in symptoms
                    if any(c.signature.id in s.signature.explains and _same_failure(s, c)
                           for c in causes)]
        symptoms = [s for s in symptoms if not any(s is p for p in promoted)]
        causes += promoted
        symptoms.sort(key=lambda f: self.rank[f.signature.id])
        causes, explained = _explained(causes)
        if causes:
            return causes, explained + symptoms
        return symptoms[:1], symptoms[1:]

    def _went_on(self, sid):
        """Whether, in every file with lines of a guess, one of its alone_unless lines
        came after the last of them (the job went on past them)."""
        unless = self.unless_at.get(sid)
        if not unless:
            return False
        return all(unless.get(file, 0) > at for file, at in self.guess_at.get(sid, {}).items())


def _same_failure(a, b):
    """Whether two findings can be one rank's (or one host's) failure: their ranks meet,
    or, where the log does not say whose lines they are, their hosts do."""
    if a.ranks and b.ranks:
        return bool(a.ranks & b.ranks)
    if a.hosts and b.hosts:
        return bool(a.hosts & b.hosts)
    return True


def _explained(causes):
    """(causes, explained): a cause whose signature ``explains`` another one found on the
    same ranks takes that one's place (the more specific cause, wherever the log shows
    it: ``rendezvous.hostname`` after the connect that failed for want of the name), and
    the other becomes its consequence. A conditional cause (``needs``: read from normal
    INFO lines, such as the interface or transport NCCL chose) comes after the causes
    that a log line states, unless it explains one of them."""
    position = {id(f): i for i, f in enumerate(causes)}
    explained = []
    for f in causes:
        for g in causes:
            if (g is not f and g.signature.id in f.signature.explains
                    and _same_failure(f, g) and not any(g is e for e in explained)):
                explained.append(g)
                position[id(f)] = min(position[id(f)], position[id(g)])
    kept = [f for f in causes if not any(f is g for g in explained)]
    leads = {id(f) for f in kept
             if not f.conditional or any(g.signature.id in f.signature.explains
                                         for g in explained)}
    kept.sort(key=lambda f: (id(f) not in leads, position[id(f)]))
    return kept, explained
