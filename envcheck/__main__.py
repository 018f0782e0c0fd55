"""``envcheck`` and ``python -m envcheck``: start the run's head start, then the CLI.

The head start (``run/headstart.py``) begins importing torch before the CLI's own
libraries (typer, rich) are imported: tens of milliseconds more of overlap.

From the first line of ``envcheck run``, SIGINT, SIGTERM and SIGHUP end it with one line,
128 + N and no traceback, whenever they land (``launch/signals.py``).
"""

import signal
import sys

from .launch import signals


def main():
    run = sys.argv[1:2] == ["run"]  # other commands start no rank: not even the import
    if run:
        signals.install()
    head = None
    try:
        try:
            from .core.limits import ensure_std_fds

            # Before the head start opens its pipes: never on fd 0, 1 or 2. Inside the
            # try: a Ctrl-C may land here too.
            ensure_std_fds()
            if run:
                from .run import headstart

                signals.act()
                with signals.held():  # until it is recorded here, to be closed
                    head = headstart.begin(sys.argv[1:])
                signals.act()
            from .cli import entry

            signals.act()
            entry(head=head)
        finally:  # also when a signal (see headstart._stop) lands before entry took it
            if head is not None:
                head.close()
    except KeyboardInterrupt:  # Ctrl-C before the CLI could take it, or as it let go
        signals.note(signal.SIGINT)
        signals.say()
        sys.exit(128 + signal.SIGINT)
    except SystemExit as exc:
        # A signal whose own exception was swallowed (see launch/signals.py) still ends
        # the run as interrupted, whatever the run itself would have exited with.
        if signals.noted is not None and exc.code != 128 + signals.noted:
            signals.say()
            sys.exit(128 + signals.noted)
        raise


if __name__ == "__main__":
    main()
