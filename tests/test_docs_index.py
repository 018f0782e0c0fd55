"""docs/README.md is the index of every document, and every link in it leads somewhere."""

import os
import re

from conftest import ROOT

DOCS = os.path.join(ROOT, "docs")
LINK = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")


def _index():
    with open(os.path.join(DOCS, "README.md"), encoding="utf-8") as f:
        return f.read()


def test_every_document_is_in_the_index():
    linked = {os.path.normpath(os.path.join(DOCS, m)) for m in LINK.findall(_index())}
    docs = {os.path.join(DOCS, n) for n in os.listdir(DOCS)
            if n.endswith(".md") and n != "README.md"}
    assert sorted(os.path.basename(p) for p in docs - linked) == []


def test_every_link_of_the_index_resolves():
    missing = [m for m in LINK.findall(_index())
               if not os.path.exists(os.path.normpath(os.path.join(DOCS, m)))]
    assert missing == []
