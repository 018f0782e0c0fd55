"""The screen's first block with ``--model``: what the user's model can and cannot do.

It comes before the node's answer: the user asked about the model. A line per
capability (``report.model_answer``), what fails in the training loop with the
attributes that stop it, what to do instead (each remedy tried on the model in the same
run, or marked untested) and what exit code that gives, with and without --strict.
"""

from ..core.text import wrap
from ..report import model_answer
from .paint import PLAIN

GLYPH = {model_answer.WORKS: ("✓", "green"), model_answer.FAILS: ("✗", "bold red"),
         model_answer.UNCHECKED: ("-", "dim")}
LABEL_WIDTH = 12


def lines(report, width, paint=PLAIN, strict=False):
    """The block, or [] without --model."""
    found = model_answer.answer(report)
    if found is None:
        return []
    caps = found["capabilities"]
    failing = [c for c in caps if c["status"] == model_answer.FAILS]
    build = next((c for c in failing if c["key"] == "build"), None)
    if build:
        head = paint("✗ Your model does not build or run here: %s" % build["detail"], "bold red")
    elif failing:
        head = paint("✗ Your model will fail in training: %s" % ", ".join(
            c["label"] for c in failing), "bold red")
    else:
        works = [c["label"] for c in caps if c["status"] == model_answer.WORKS]
        head = paint("✓ Your model survives what training does to it here: %s"
                     % ", ".join(works), "bold green")
    out = wrap(head, width, subsequent_indent="  ") if build else [head]
    out.append("  " + found["spec"])
    indent = " " * (4 + LABEL_WIDTH + 1)
    for c in caps:
        glyph, style = GLYPH[c["status"]]
        if c["status"] == model_answer.FAILS:
            text = "%s cannot be copied" % ", ".join(c["blocked_by"]) if c["blocked_by"] \
                else c["detail"]
            text = "fails: %s; in training: %s" % (text, c["in_training"])
        elif c["status"] == model_answer.WORKS:
            text = "works: " + c["detail"]
        else:
            text = "not checked: %s" % c["detail"]
        if c.get("not_run"):
            text += "; not run: %s" % ", ".join(c["not_run"])
        body = wrap(text, width - len(indent)) or [""]
        out.append("  %s %-*s %s" % (paint(glyph, style), LABEL_WIDTH, c["label"], body[0]))
        out.extend(indent + line for line in body[1:])
    out += _remedy_lines(failing, width, paint)
    out += _exit_lines(found, strict, width)
    return out + [""]


def _remedy_lines(failing, width, paint):
    """Each remedy once, with the capabilities it answers, works first, then untested,
    then what was tried and fails too."""
    merged = {}
    for c in failing:
        for r in c.get("remedies") or ():
            entry = merged.setdefault(r["key"], dict(r, caps=[]))
            entry["caps"].append(c["label"])
    if not merged:
        return []
    order = {"tried here: works": 0, "untested": 1, "tried here: fails too": 2}
    out = ["  Instead (tried on your model in this run, unless untested):"]
    for r in sorted(merged.values(), key=lambda r: order[r["status"]]):
        mark = "✗ not" if r["status"] == "tried here: fails too" else "→"
        text = "%s: %s — %s" % (", ".join(r["caps"]), r["text"], r["status"])
        body = wrap(text, width - 6)
        out.append("    %s %s" % (paint(mark, "cyan" if mark == "→" else "red"), body[0]))
        out.extend("      " + line for line in body[1:])
    return out


def _exit_lines(found, strict, width):
    plain, under_strict = found["exit_code"], found["exit_code_strict"]
    if not found["fails"]:
        return []
    if plain == under_strict:
        text = "exit code %d" % plain
    else:
        text = ("exit code %d (torch behaves as the matrix knows: the fix is in your "
                "model's code), %d under --strict%s" % (
                    plain, under_strict, " (this run)" if strict else ""))
    return wrap(text, width - 2, initial_indent="  ", subsequent_indent="    ")
