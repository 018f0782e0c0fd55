"""Host names as a cluster admin writes them: node[01-16,40] (SLURM's hostlist form)."""

import re

_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def _ranges(numbers, width):
    out, start, prev = [], None, None
    for n in numbers + [None]:
        if start is not None and (n is None or n != prev + 1):
            out.append("%0*d" % (width, start) if start == prev else
                       "%0*d-%0*d" % (width, start, width, prev))
            start = None
        if n is not None and start is None:
            start = n
        prev = n
    return out


def compress(hosts):
    """['node01', 'node02', 'node03', 'gpu7'] -> 'gpu7, node[01-03]'; names without a
    number, and numbered names alone in their group, stay as they are."""
    groups, plain = {}, []
    for h in sorted(set(hosts)):
        m = _NUMBERED.match(h)
        if m:
            groups.setdefault((m.group(1), len(m.group(2))), []).append(int(m.group(2)))
        else:
            plain.append(h)
    parts = list(plain)
    for (prefix, width), numbers in groups.items():
        numbers.sort()
        if len(numbers) == 1:
            parts.append("%s%0*d" % (prefix, width, numbers[0]))
        else:
            parts.append("%s[%s]" % (prefix, ",".join(_ranges(numbers, width))))
    return ", ".join(sorted(parts))


def listing(hosts, plain_up_to=6):
    """A few hosts by name, more of them compressed."""
    hosts = sorted(set(hosts), key=natural)
    return ", ".join(hosts) if len(hosts) <= plain_up_to else compress(hosts)


def natural(name):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


# SLURM's own hostlist, as `scontrol show hostlist` writes it and `scontrol show
# hostnames` reads it (src/common/hostlist.c): what srun/sbatch --exclude and --nodelist
# take. A name splits into a prefix and the digits that end it; a name is added to the
# range before it when the prefix is the same, its number is the next one and the
# zero-padding agrees; ranges of one prefix in a row share one bracket. The order given
# is kept, as scontrol keeps it (sort first for a stable file).

_SLURM_SEP = re.compile(r"[,\s]+")


def _split(name):
    """'node007' -> ('node', 7, 3); a name without a trailing number -> (name, None, 0)."""
    i = len(name)
    while i > 0 and name[i - 1].isdigit():
        i -= 1
    if i == len(name):
        return name, None, 0
    return name[:i], int(name[i:]), len(name) - i


def _zeros(number, width):
    """How many zeros pad ``number`` to ``width`` digits (hostlist.c _zero_padded)."""
    return max(0, width - len(str(number)))


def _same_padding(lo, width, number, number_width):
    """(joinable, width of the joined range) as hostlist.c _width_equiv decides it for a
    range starting at ``lo`` and a host ``number``."""
    if width == number_width:
        return True, width
    lo_own, lo_other = _zeros(lo, width), _zeros(lo, number_width)
    n_own, n_other = _zeros(number, number_width), _zeros(number, width)
    if lo_own != lo_other and n_own != n_other:
        return False, width
    if lo_own != lo_other:  # the number reads the same at the range's width
        return True, width
    return True, number_width  # the range reads the same at the number's width


def slurm(hosts):
    """Host names in SLURM's compressed form, in the order given:
    ['node1', 'node2', 'node3', 'node7'] -> 'node[1-3,7]' (as `scontrol show
    hostlist node1,node2,node3,node7` writes it)."""
    ranges: list = []  # [prefix, lo, hi, width]; lo None: a name without a number
    for name in hosts:
        prefix, number, width = _split(name)
        last = ranges[-1] if ranges else None
        if number is not None and last and last[0] == prefix and last[1] is not None \
                and last[2] + 1 == number:
            joinable, joined = _same_padding(last[1], last[3], number, width)
            if joinable:
                last[2], last[3] = number, joined
                continue
        ranges.append([prefix, number, number, width])
    parts, i = [], 0
    while i < len(ranges):
        prefix, lo, hi, width = ranges[i]
        if lo is None:
            parts.append(prefix)
            i += 1
            continue
        j = i
        while j + 1 < len(ranges) and ranges[j + 1][0] == prefix and ranges[j + 1][1] is not None:
            j += 1
        run = ranges[i:j + 1]
        if len(run) == 1 and lo == hi:
            parts.append("%s%0*d" % (prefix, width, lo))
        else:
            parts.append("%s[%s]" % (prefix, ",".join(
                "%0*d" % (w, a) if a == b else "%0*d-%0*d" % (w, a, w, b)
                for _, a, b, w in run)))
        i = j + 1
    return ",".join(parts)


def expand(text):
    """SLURM's hostlist read back into names, as `scontrol show hostnames` does:
    'node[1-3,7],gpu01' -> ['node1', 'node2', 'node3', 'node7', 'gpu01']. ValueError
    quotes what is not a hostlist."""
    names, depth, word = [], 0, ""
    for ch in text + ",":
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if depth < 0 or depth > 1:
            raise ValueError("not a hostlist: %r (unbalanced brackets)" % text)
        if depth == 0 and _SLURM_SEP.fullmatch(ch):
            if word:
                names += _expand_one(word, text)
            word = ""
        else:
            word += ch
    if depth:
        raise ValueError("not a hostlist: %r (unbalanced brackets)" % text)
    return names


_BRACKET = re.compile(r"^([^\[\]]*)\[([^\[\]]+)\]$")


def _expand_one(word, text):
    if "[" not in word and "]" not in word:
        return [word]
    m = _BRACKET.match(word)
    if not m:
        raise ValueError("not a hostlist: %r (a bracket must end the name)" % text)
    prefix, out = m.group(1), []
    for part in m.group(2).split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or not (hi or lo).isdigit() or int(hi or lo) < int(lo):
            raise ValueError("not a hostlist: %r (range %r)" % (text, part))
        out += ["%s%0*d" % (prefix, len(lo), n) for n in range(int(lo), int(hi or lo) + 1)]
    return out
