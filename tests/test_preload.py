"""What a rank imports before its probes need it (worker/runtime.Preloading, zygote).

A probe's declared ``preload`` (torch's own modules; its plan entry carries it, from
probes/suite.py) is imported by the zygote before it forks (CPU build) or else by the
rank's preload thread; its ``preload_in_rank`` (the frameworks,
which read RANK as they import) only by the rank's thread, from when the probe before
the one that needs them starts. A probe waits for the framework imports only where it
declares them, or runs the user's code.
"""

import json
import os
import subprocess
import sys

from conftest import ROOT

# fake_fw stands for a framework: it notes where it was imported and then blocks until
# the test lets it finish (the file "go" appears), so what waits for it shows.
MODULES = {
    "fakeprobe_torch.py": "",
    "fakeprobe_plain.py": "",
    "fakeprobe_fw.py": "",
    "fake_torchy.py": "",
    "fake_fw.py": (
        "import os, threading, time\n"
        "THREAD = threading.current_thread().name\n"
        "RANK = os.environ.get('RANK')\n"
        "while not os.path.exists(os.path.join(os.path.dirname(__file__), 'go')):\n"
        "    time.sleep(0.01)\n"
        "DONE = True\n"),
}

SCRIPT = r'''
import json, os, sys
sys.path.insert(0, sys.argv[1])
from envcheck.worker import runtime, zygote

entries = [{"module": "fakeprobe_torch", "preload": ["fake_torchy"]},
           {"module": "fakeprobe_plain", "preload": [], "preload_in_rank": []},
           {"module": "fakeprobe_fw", "preload": ["fake_torchy"],
            "preload_in_rank": ["fake_fw"]}]
seen = {"cpu_build": zygote.preload(entries)}
# The zygote, before the fork: torch's modules, never a framework.
seen["zygote"] = sorted(m for m in ("fake_torchy", "fake_fw") if m in sys.modules)
os.environ["RANK"] = "1"  # as in the forked rank
preloading = runtime.Preloading({"probes": entries})
preloading.before(0, entries[0], False)
# The framework's import waits for the probe before the one that needs it.
seen["fw_begun_in_first_probe"] = "fake_fw" in sys.modules
preloading.before(1, entries[1], False)
while "fake_fw" not in sys.modules:  # begun now; it finishes once "go" is there
    pass
seen["fw_done_in_probe_before"] = hasattr(sys.modules["fake_fw"], "DONE")
open(os.path.join(sys.argv[1], "go"), "w").close()
# The frameworks probe waits until the framework is imported.
preloading.before(2, entries[2], False)
fw = sys.modules.get("fake_fw")
seen["fw"] = {"done": getattr(fw, "DONE", False), "thread": getattr(fw, "THREAD", None),
              "rank": getattr(fw, "RANK", None)}
# The user's code (a --probe-path file first, or a --model) waits for everything.
del sys.modules["fake_fw"]
preloading = runtime.Preloading({"probes": entries})
preloading.before(0, {"path": "mine.py"}, True)
seen["fw_before_user_code"] = hasattr(sys.modules.get("fake_fw"), "DONE")
print(json.dumps(seen))
'''


def test_frameworks_import_in_the_ranks_thread_never_in_the_zygote(tmp_path):
    for name, text in MODULES.items():
        (tmp_path / name).write_text(text)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=ROOT), stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "cpu_build": True,
        "zygote": ["fake_torchy"],
        "fw_begun_in_first_probe": False,
        "fw_done_in_probe_before": False,
        "fw": {"done": True, "thread": "envcheck-preload", "rank": "1"},
        "fw_before_user_code": True,
    }
