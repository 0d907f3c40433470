"""XGrammar as an oracle: reads JSON lines {"tag": STRUCTURAL_TAG, "text": TEXT} on stdin and
writes one JSON list of verdicts (true, false, or null where XGrammar refuses the tag).

Run with the venv that scripts/oracle-venv makes (XGrammar 0.2.8 from PyPI, without torch:
tests/oracles/stubs stands in for torch and transformers, which the grammar API never uses)."""

import json
import sys

import xgrammar as xgr
from xgrammar.testing import _is_grammar_accept_string

grammars = {}
verdicts = []
for line in sys.stdin:
    if not line.strip():
        continue
    case = json.loads(line)
    key = json.dumps(case["tag"], sort_keys=True)
    if key not in grammars:
        try:
            grammars[key] = xgr.Grammar.from_structural_tag(json.dumps(case["tag"]))
        except Exception as e:  # a tag XGrammar refuses
            grammars[key] = None
    g = grammars[key]
    verdicts.append(None if g is None else bool(_is_grammar_accept_string(g, case["text"])))
json.dump(verdicts, sys.stdout)
