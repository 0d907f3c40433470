#!/usr/bin/env python3
"""Writes tests/lark/llguidance-cases.json: the Lark cases of llguidance's own
test suite (parser/tests/test_lark.rs), as data.

Usage: scripts/llguidance-lark-cases.py TEST_LARK_RS [COMMIT] > tests/lark/llguidance-cases.json

The test file calls helpers with literal arguments:
  lark_ok(GRAMMAR)                       the grammar compiles
  lark_err_test(GRAMMAR, MESSAGE)        the grammar is refused
  lark_str_test_many(GRAMMAR, &[..], &[..])   texts accepted / refused
     ("FINAL_REJECT:" texts: every prefix is allowed, the whole text is not
     complete)
  json_test_many(&json!(S), &[json!(v), ..], &[..])   `start: %json S` on
     compact JSON texts
  json_err_test(&json!(S), MESSAGE)
Arguments that are not literals (format!, computed strings) are left out;
a `let NAME = literal;` or `for NAME in &[literal, ..]` binding is followed.
Only the facts are taken: grammars, texts and verdicts.
"""
import json
import re
import sys

HELPERS = {
    "lark_ok", "lark_err_test", "lark_str_test_many", "lark_str_test_many_quiet",
    "json_test_many", "json_err_test",
}


def lex(src):
    """Rust tokens: ('str', value), ('json', text), ('id', name), ('p', char)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c.isspace():
            i += 1
        elif src.startswith("//", i):
            i = src.find("\n", i)
            i = n if i < 0 else i
        elif src.startswith("/*", i):
            i = src.find("*/", i) + 2
        elif c == "r" and re.match(r'r#*"', src[i:]):
            m = re.match(r'r(#*)"', src[i:])
            hashes = m.group(1)
            start = i + len(m.group(0))
            end = src.find('"' + hashes, start)
            out.append(("str", src[start:end]))
            i = end + 1 + len(hashes)
        elif c == '"':
            j, buf = i + 1, []
            while src[j] != '"':
                if src[j] == "\\":
                    e = src[j + 1]
                    if e == "n":
                        buf.append("\n"); j += 2
                    elif e == "t":
                        buf.append("\t"); j += 2
                    elif e == "r":
                        buf.append("\r"); j += 2
                    elif e == "0":
                        buf.append("\0"); j += 2
                    elif e == "u":
                        k = src.index("}", j)
                        buf.append(chr(int(src[j + 3:k], 16))); j = k + 1
                    elif e == "x":
                        buf.append(chr(int(src[j + 2:j + 4], 16))); j += 4
                    elif e == "\n":
                        j += 2
                        while src[j] in " \t\n":
                            j += 1
                    else:
                        buf.append(e); j += 2
                else:
                    buf.append(src[j]); j += 1
            out.append(("str", "".join(buf)))
            i = j + 1
        elif src.startswith("json!(", i) or src.startswith("json!([", i):
            j, depth = i + 5, 0
            while True:
                ch = src[j]
                if ch == '"':
                    j += 1
                    while src[j] != '"':
                        j += 2 if src[j] == "\\" else 1
                elif ch in "([{":
                    depth += 1
                elif ch in ")]}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            out.append(("json", src[i + 6:j]))
            i = j + 1
        elif c.isalpha() or c == "_":
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*!?", src[i:])
            out.append(("id", m.group(0)))
            i += len(m.group(0))
        elif c.isdigit():
            m = re.match(r"[0-9_.]+[a-z0-9]*", src[i:])
            out.append(("num", m.group(0)))
            i += len(m.group(0))
        else:
            out.append(("p", c))
            i += 1
    return out


def json_value(text):
    """A json!(...) body as a JSON value, or None when it holds Rust code."""
    t = re.sub(r",(\s*[\]}])", r"\1", text.strip())
    try:
        return json.loads(t)
    except ValueError:
        return None


def compact(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


class Args:
    """Splits a call's arguments at top-level commas."""

    def __init__(self, toks, i):
        self.args, cur, depth = [], [], 0
        while True:
            t = toks[i]
            if t == ("p", "(") or t == ("p", "[") or t == ("p", "{"):
                depth += 1
            elif t == ("p", ")") or t == ("p", "]") or t == ("p", "}"):
                if depth == 0:
                    break
                depth -= 1
            if t == ("p", ",") and depth == 0:
                self.args.append(cur); cur = []
            else:
                cur.append(t)
            i += 1
        if cur:
            self.args.append(cur)
        self.end = i


def literal(arg, env):
    """A string argument (a literal, `&lit`, or a bound name)."""
    a = [t for t in arg if t != ("p", "&")]
    if len(a) == 1 and a[0][0] == "str":
        return a[0][1]
    if len(a) == 1 and a[0][0] == "id" and a[0][1] in env:
        return env[a[0][1]]
    return None


def literal_list(arg, env):
    """`&[lit, ...]`: the literal elements, and how many were not literals."""
    a = [t for t in arg if t != ("p", "&")]
    if not a or a[0] != ("p", "["):
        return [], 1
    items, cur, depth, skipped = [], [], 0, 0
    for t in a[1:-1]:
        if t in (("p", "("), ("p", "["), ("p", "{")):
            depth += 1
        elif t in (("p", ")"), ("p", "]"), ("p", "}")):
            depth -= 1
        if t == ("p", ",") and depth == 0:
            items.append(cur); cur = []
        else:
            cur.append(t)
    if cur:
        items.append(cur)
    out = []
    for it in items:
        s = literal(it, env)
        if s is None:
            skipped += 1
        else:
            out.append(s)
    return out, skipped


def json_list(arg):
    a = [t for t in arg if t != ("p", "&")]
    if not a or a[0] != ("p", "["):
        return [], 1
    out, skipped = [], 0
    for t in a[1:-1]:
        if t[0] == "json":
            v = json_value(t[1])
            if v is None:
                skipped += 1
            else:
                out.append(compact(v))
    return out, skipped


def extract(src):
    toks = lex(src)
    cases, skipped, env, loops = [], 0, {}, {}
    test = None
    i = 0
    while i < len(toks):
        t = toks[i]
        if t == ("id", "fn") and toks[i + 1][0] == "id":
            test, env, loops = toks[i + 1][1], {}, {}
        if t == ("id", "let") and toks[i + 1][0] == "id" and toks[i + 2] == ("p", "=") \
                and toks[i + 3][0] == "str" and toks[i + 4] == ("p", ";"):
            env[toks[i + 1][1]] = toks[i + 3][1]
        if t == ("id", "for") and toks[i + 1][0] == "id" and toks[i + 2] == ("id", "in"):
            j = i + 3
            if toks[j] == ("p", "&"):
                j += 1
            if toks[j] == ("p", "["):
                k, vals = j + 1, []
                while toks[k] != ("p", "]"):
                    if toks[k][0] == "str":
                        vals.append(toks[k][1])
                    k += 1
                loops[toks[i + 1][1]] = vals
        if t[0] == "id" and t[1] in HELPERS and toks[i + 1] == ("p", "("):
            args = Args(toks, i + 2)
            name = t[1]
            first = [x for x in args.args[0] if x != ("p", "&")]
            grammars = []
            if name.startswith("json"):
                if first and first[0][0] == "json":
                    v = json_value(first[0][1])
                    if v is not None:
                        grammars = ["start: %json " + compact(v)]
            elif len(first) == 1 and first[0][0] == "id" and first[0][1] in loops:
                grammars = loops[first[0][1]]
            else:
                g = literal(args.args[0], env)
                grammars = [] if g is None else [g]
            if not grammars:
                skipped += 1
            for g in grammars:
                case = {"test": test, "grammar": g}
                if name in ("lark_err_test", "json_err_test"):
                    case["error"] = literal(args.args[1], env)
                elif name == "lark_ok":
                    pass
                else:
                    if name == "json_test_many":
                        acc, s1 = json_list(args.args[1])
                        rej, s2 = json_list(args.args[2])
                    else:
                        acc, s1 = literal_list(args.args[1], env)
                        rej, s2 = literal_list(args.args[2], env)
                    skipped += s1 + s2
                    case["accept"] = acc
                    case["reject"] = [r for r in rej if not r.startswith("FINAL_REJECT:")]
                    case["final_reject"] = [r[len("FINAL_REJECT:"):] for r in rej
                                            if r.startswith("FINAL_REJECT:")]
                cases.append(case)
            i = args.end
        i += 1
    return cases, skipped


def main():
    src = open(sys.argv[1], encoding="utf-8").read()
    commit = sys.argv[2] if len(sys.argv) > 2 else None
    cases, skipped = extract(src)
    doc = {
        "source": "guidance-ai/llguidance parser/tests/test_lark.rs (MIT licence)",
        "commit": commit,
        "note": "grammars, texts and verdicts of llguidance's own Lark tests; "
                "arguments computed at run time are left out",
        "left_out": skipped,
        "cases": cases,
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
