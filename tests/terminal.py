"""A pseudo-terminal for tests and dev/screens.py: what a terminal COLUMNS wide shows.

Run under script(1), which gives envcheck a pseudo-terminal of its own, as a user's
terminal would.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SGR = re.compile(r"\x1b\[[0-9;]*m")  # a colour or attribute escape
CONTROL = re.compile(r"(\x1b\[\??[0-9;]*[A-Za-z]|\r|\n)")
BOLD_RED, YELLOW, GREEN, RESET = "\x1b[1;31m", "\x1b[33m", "\x1b[32m", "\x1b[0m"


def on_terminal(columns, *args, env=None, cwd=ROOT):
    """(exit code, the lines a terminal COLUMNS wide shows, the raw output): colour
    escapes kept, a line redrawn after a carriage return shows its last version."""
    return on_terminal_command(columns, [sys.executable, "-m", "envcheck"] + list(args),
                               env=env, cwd=cwd)


def on_terminal_command(columns, argv, env=None, base=None, cwd=ROOT):
    """``argv`` run in a pseudo-terminal COLUMNS wide (script(1)): ``base`` (else this
    environment) without NO_COLOR, a colour terminal, then ``env`` over it."""
    command = " ".join("'%s'" % a for a in argv)
    full_env = {k: v for k, v in (base or os.environ).items() if k != "NO_COLOR"}
    full_env.update(COLUMNS=str(columns), LINES="50", TERM="xterm-256color")
    full_env.update(env or {})
    proc = subprocess.run(["script", "-qec", command, "/dev/null"], capture_output=True,
                          cwd=cwd, timeout=300, env=full_env, stdin=subprocess.DEVNULL)
    raw = proc.stdout.decode("utf-8", "replace")
    return proc.returncode, screen(raw), raw


def screen(raw):
    """The lines a terminal shows after ``raw``: enough of one to follow a live view
    (carriage return, cursor up, erase line); colour escapes are kept as text."""
    rows, row, restart = [""], 0, False
    for token in CONTROL.split(raw):
        if token == "\n":
            row += 1
            rows.extend([""] * (row + 1 - len(rows)))
            restart = False
        elif token == "\r":
            restart = True
        elif token.startswith("\x1b[") and not token.endswith("m"):
            if token.endswith("A"):
                row = max(0, row - int(token[2:-1] or 1))
            elif token == "\x1b[2K":
                rows[row] = ""
        elif token:
            rows[row] = (token if restart else rows[row] + token)
            restart = False
    while rows and not rows[-1]:
        rows.pop()
    return rows


def visible(line):
    return SGR.sub("", line)
