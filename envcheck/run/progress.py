"""Live progress while ranks run: a spinner on a terminal, plain lines otherwise.

Fed with rank 0's records by the supervisor; the final screen is printed separately, so
progress goes to stderr and never mixes with a report on stdout.
"""

import sys


class Progress:
    def __init__(self, stream=None, enabled=True):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self._status = None
        if self.tty:
            from rich.console import Console
            self._status = Console(file=self.stream).status("starting ranks…")

    def __enter__(self):
        if self._status:
            self._status.start()
        return self

    def __exit__(self, *exc):
        if self._status:
            self._status.stop()
        return False

    def __call__(self, rec):
        if not self.enabled or rec.get("rank") != 0:
            return
        kind = rec["t"]
        if kind == "hello":
            self._say("torch imported in %.2f s" % rec.get("torch_import_s", 0))
        elif kind == "setup_start":
            self._say("init_process_group (%s)" % rec.get("backend"))
        elif kind == "probe_start":
            self._say("probe %s" % rec["probe"])
        elif kind == "check_start" and self.tty:
            self._say("probe %s: %s" % (rec["probe"], rec["check"]))

    def _say(self, text):
        if self._status:
            self._status.update(text + "…")
        else:
            self.stream.write("envcheck: %s\n" % text)
            self.stream.flush()
