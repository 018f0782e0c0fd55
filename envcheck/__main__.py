"""``envcheck`` and ``python -m envcheck``: start the run's head start, then the CLI.

The head start (``run/headstart.py``) begins importing torch before the CLI's own
libraries (typer, rich) are imported: tens of milliseconds more of overlap.
"""

import sys


def main():
    from .core.limits import ensure_std_fds

    ensure_std_fds()  # before the head start opens its pipes: never on fd 0, 1 or 2
    head = None
    if sys.argv[1:2] == ["run"]:  # other commands start no rank: not even the import
        from .run import headstart

        head = headstart.begin(sys.argv[1:])
    try:
        from .cli import entry

        entry(head=head)
    finally:  # also when a signal (see headstart._stop) lands before entry took it
        if head is not None:
            head.close()


if __name__ == "__main__":
    main()
