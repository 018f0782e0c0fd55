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
