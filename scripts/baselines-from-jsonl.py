"""Writes tests/baselines/{maskbench-dev,test-suite}.passing from `constrain maskbench --jsonl` output."""
import json, os, sys

mb_jsonl, suite_jsonl, suite_root = sys.argv[1:4]
passing = sorted(os.path.basename(r["name"]) for r in map(json.loads, open(mb_jsonl)) if r["outcome"] == "pass")
with open("tests/baselines/maskbench-dev.passing", "w") as f:
    f.write("# MaskBench dev schemas that pass (scripts/maskbench-baseline)\n" + "\n".join(passing) + "\n")
tests = []
for r in map(json.loads, open(suite_jsonl)):
    path, group = r["name"].rsplit("#", 1)
    rel = os.path.relpath(path, suite_root) + "#" + group
    if r["outcome"] in ("compile_error", "timeout"):
        continue
    for i, inst in enumerate(r["instances"]):
        if inst["valid"] == inst["accepted"]:
            tests.append(f"{rel}#{i}")
with open("tests/baselines/test-suite.passing", "w") as f:
    f.write("# JSON-Schema-Test-Suite tests that pass (scripts/maskbench-baseline)\n" + "\n".join(sorted(tests)) + "\n")
print(f"{len(passing)} MaskBench schemas, {len(tests)} suite tests passing")
