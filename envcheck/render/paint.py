"""Colour on a terminal, and only there.

Colour is ANSI escapes written by rich's styles. It is used when stdout (or stderr, for
the live view) is a terminal, unless ``--no-color`` is given, ``NO_COLOR`` is set to
anything but the empty string (https://no-color.org) or ``TERM=dumb``. Pipes, files,
JSON, JUnit and markdown never get an escape: they are rendered with ``PLAIN``.
"""

import os
import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def wanted(stream, no_color=False):
    """Whether text written to ``stream`` should be coloured."""
    if no_color or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real stream
        return False


def visible(text):
    """``text`` as the terminal shows it: what its width is measured on."""
    return _ANSI.sub("", text)


class Painter:
    """``paint(text, style)``: ``text`` in a rich style ("bold red") when enabled."""

    def __init__(self, enabled):
        self.enabled = enabled
        self._cache = {}

    def __call__(self, text, style):
        if not self.enabled or not text or not style:
            return text
        rendered = self._cache.get(style)
        if rendered is None:
            from rich.color import ColorSystem
            from rich.style import Style

            # The 8 standard colours: every terminal shows them, themes keep them legible.
            rendered = self._cache[style] = Style.parse(style).render(
                "\0", color_system=ColorSystem.STANDARD)
        return rendered.replace("\0", text)


PLAIN = Painter(False)


def lead_glyphs(text, paint, styles):
    """Colour the glyph a line starts with ('  ✓ wheel …', '✗ 2.4.1 will not work'):
    for screens rendered as plain lines elsewhere (``envcheck check``). A line that
    starts at the margin is the answer itself: it is coloured whole."""
    if not paint.enabled:
        return text
    out = []
    for line in text.split("\n"):
        body = line.lstrip(" ")
        style = styles.get(body[:1]) if body[1:2] == " " else None
        if style and body is line:
            line = paint(line, "bold " + style if "bold" not in style else style)
        elif style:
            line = line[:len(line) - len(body)] + paint(body[:1], style) + body[1:]
        out.append(line)
    return "\n".join(out)
