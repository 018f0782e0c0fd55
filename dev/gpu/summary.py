"""One line per envcheck JSON report of a GPU run (dev/gpu_check.sh): the answer, every
check that did not pass with its verdict, each rank's device, and whether the ranks were
forked. The device tool returns only the output's tail, so this is what to read first."""
import glob
import json
import os
import sys


def main(folder):
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as exc:
            print("%s: unreadable (%s)" % (os.path.basename(path), exc))
            continue
        answer = report.get("answer")
        if not isinstance(answer, dict) or "text" not in answer:
            if isinstance(answer, dict) and "works" in answer:  # envcheck check --json
                print("== %s: %s works=%s, %s" % (os.path.basename(path), answer.get("build"),
                      answer["works"], "; ".join(c["id"] + " " + c["status"]
                                                 for c in answer.get("criteria", []))))
            continue
        ranks = ",".join("%s:%s" % (r.get("rank"), r.get("device")) for r in report.get("ranks", []))
        forked = sorted({str(p.get("forked")) for a in report.get("attempts", [])
                         for phases in (a.get("timing") or {}).get("ranks", {}).values()
                         for p in phases if p.get("phase") == "start"})
        print("== %s exit=%s %s | ranks %s | forked %s | %.1fs" % (
            os.path.basename(path), answer.get("exit_code"), answer["text"], ranks,
            "/".join(forked), report.get("duration_s") or 0))
        for check in report.get("checks", []):
            if check.get("outcome") == "passed" and check.get("verdict") in ("ok", None):
                continue
            print("   %s.%s %s/%s: %s" % (check.get("probe"), check.get("check"),
                                        check.get("outcome"), check.get("verdict"),
                                        (check.get("detail") or "")[:110].replace("\n", " ")))


if __name__ == "__main__":
    main(sys.argv[1])
