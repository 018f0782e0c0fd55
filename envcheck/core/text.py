"""How envcheck shortens text and names sets of ranks, on both sides of the boundary.

One truncation rule everywhere (a rank's detail, a JSON field, a table cell, a markdown
line): whitespace is collapsed, the text is cut at a word boundary where one is close,
and an ellipsis says that something was cut. The full text stays where there is room for
it (the error's message and traceback in the JSON report).
"""

import textwrap

ELLIPSIS = "…"


def wrap(text, width, initial_indent="", subsequent_indent=""):
    """Lines of at most ``width`` where words allow: a word is never split, so a URL, a
    path or a command longer than the line goes whole on a line of its own (copied, it
    still works), and a hyphen is not a place to break ('--checkpoint.exclude_from_loading'
    stays one)."""
    return textwrap.wrap(text, width, initial_indent=initial_indent,
                         subsequent_indent=subsequent_indent, break_long_words=False,
                         break_on_hyphens=False)


def cut(text, limit):
    """``text`` in at most ``limit`` characters, spacing kept (a table's line): cut at
    the last space in its final third, else mid-word, and end with the ellipsis."""
    text = str(text)
    if len(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS[:limit]
    head = text[:limit - 1]
    space = head.rstrip().rfind(" ")
    if space >= (limit * 2) // 3:
        head = head[:space]
    return head.rstrip(" ,;:") + ELLIPSIS


def shorten(text, limit):
    """One line of at most ``limit`` characters: whitespace collapsed, then ``cut``."""
    return cut(" ".join(str(text or "").split()), limit)


def first_line(text, limit=200):
    """The first non-blank line of ``text``, shortened: the line an error is known by."""
    for line in str(text or "").strip().splitlines():
        if line.strip():
            return shorten(line, limit)
    return ""


def rank_numbers(ranks):
    """'2', '0,2', '0–3', '0–3,6': three or more consecutive ranks as a range."""
    ranks = sorted({int(r) for r in ranks})
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append("%d–%d" % (ranks[i], ranks[j]))
            i = j + 1
        else:
            parts.append(str(ranks[i]))
            i += 1
    return ",".join(parts)


def rank_set(ranks):
    """'rank 2', 'ranks 0,2', 'ranks 0–3', 'ranks 0–3,6'."""
    ranks = {int(r) for r in ranks}
    return "%s %s" % ("rank" if len(ranks) == 1 else "ranks", rank_numbers(ranks))


def parse_rank_numbers(text):
    """[0, 1, 2, 3, 6] from '0–3,6' (what rank_numbers writes; '0,1' too)."""
    out: list = []
    for part in text.split(","):
        low, _, high = part.partition("–")
        out += range(int(low), int(high or low) + 1)
    return out


# Control characters in text envcheck did not write itself (a rank's error, a host name
# in an answer file, a GPU name from nvidia-smi, a path): on a terminal ESC and CSI start
# sequences that restyle it, move the cursor, clear the screen or set the window title
# (OSC), so screens show every C0 control (but newline and tab), DEL and every C1 control
# (8-bit CSI 0x9b, OSC 0x9d ...) escaped, as ``\x1b``. The JSON report keeps the raw text
# (JSON escapes it: see ``json_screen``).
_CONTROL = [c for c in range(0x00, 0x20) if c not in (0x09, 0x0a)] + list(range(0x7f, 0xa0))
_ESCAPED = {c: "\\x%02x" % c for c in _CONTROL}
_C1_JSON = {c: "\\u%04x" % c for c in range(0x7f, 0xa0)}


def printable(value):
    """``value`` (strings in dicts and lists too) with its control characters shown
    escaped: the one sanitiser for anything envcheck did not write and a screen shows."""
    if isinstance(value, str):
        return value.translate(_ESCAPED)
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable(v) for v in value]
    return value


def json_screen(text):
    """JSON text (``ensure_ascii=False``) as a screen may show it: JSON escapes C0
    controls itself; DEL and the C1 controls are escaped here too (``\\u009b``), the
    same value for a JSON reader."""
    return text.translate(_C1_JSON)
