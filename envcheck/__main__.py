"""``envcheck`` and ``python -m envcheck``: start the run's head start, then the CLI.

The head start (``run/headstart.py``) begins importing torch before the CLI's own
libraries (typer, rich) are imported: tens of milliseconds more of overlap.

From the first line of ``envcheck run``, SIGINT, SIGTERM and SIGHUP end it with one line,
128 + N and no traceback, whenever they land (``run/interrupts.py``).
"""

import signal
import sys

from .run import interrupts


def main():
    run = sys.argv[1:2] == ["run"]  # other commands start no rank: not even the import
    if run:
        interrupts.install()
    head = None
    try:
        try:
            from .core.limits import ensure_std_fds

            # Before the head start opens its pipes: never on fd 0, 1 or 2. Inside the
            # try: a Ctrl-C may land here too.
            ensure_std_fds()
            if run:
                from .run import headstart

                interrupts.act()
                with interrupts.held():  # until it is recorded here, to be closed
                    head = headstart.begin(sys.argv[1:])
                interrupts.act()
            from .cli import entry

            interrupts.act()
            entry(head=head)
        finally:  # also when a signal (see headstart._stop) lands before entry took it
            if head is not None:
                head.close()
    except KeyboardInterrupt:  # Ctrl-C before the CLI could take it, or as it let go
        interrupts.note(signal.SIGINT)
        interrupts.say()
        sys.exit(128 + signal.SIGINT)
    except SystemExit as exc:
        # A signal whose own exception was swallowed (see run/interrupts.py) still ends
        # the run as interrupted, whatever the run itself would have exited with.
        if interrupts.noted is not None and exc.code != 128 + interrupts.noted:
            interrupts.say()
            sys.exit(128 + interrupts.noted)
        raise


if __name__ == "__main__":
    main()
