"""Compares constrain's verdicts on Lark grammars with llguidance's.

Reads the corpus `tests/lark.rs::write_oracle_corpus` writes (grammars,
texts, and constrain's verdicts: whether the text is a viable prefix and
whether it is accepted whole) and asks llguidance (byte tokenizer) the
same two questions. Prints the agreement figures; exits 1 when constrain
accepts a text, or a prefix, that llguidance refuses (a soundness bug),
0 otherwise. Texts llguidance accepts and constrain refuses are counted
and shown, not failed: the known differences are trailing ignored text
and whitespace inside %json blocks (docs/lark.md). A raw U+007F inside a
%json string is valid JSON that llguidance refuses: counted on its own,
not failed.
"""

import json
import sys

import llguidance as L

tok = L.LLTokenizer("byte")


def llg(grammar, text):
    # A grammar list (llguidance's TopLevelGrammar JSON) goes in as it is.
    g = grammar if grammar.lstrip().startswith("{") else L.LLMatcher.grammar_from_lark(grammar)
    m = L.LLMatcher(tok, g, log_level=0)
    if m.is_error():
        raise RuntimeError(m.get_error())
    ts = tok.tokenize_bytes(text.encode())
    n = m.try_consume_tokens(ts)
    prefix = n == len(ts)
    return prefix, prefix and m.is_accepting()


def main(path):
    corpus = json.load(open(path))
    total = agree = unsound = subset = raw_del = 0
    shown = 0
    for g in corpus:
        for t in g["texts"]:
            p, a = llg(g["grammar"], t["text"])
            total += 1
            if (p, a) == (t["prefix"], t["accept"]):
                agree += 1
                continue
            if ((t["accept"] and not a) or (t["prefix"] and not p)) and "%json" in g["grammar"] and "\x7f" in t["text"]:
                # A raw U+007F inside a JSON string is valid JSON (RFC 8259
                # escapes only U+0000-U+001F); llguidance's %json refuses it.
                raw_del += 1
                kind = "raw U+007F in a JSON string (valid JSON, llguidance refuses it)"
            elif (t["accept"] and not a) or (t["prefix"] and not p):
                unsound += 1
                kind = "UNSOUND (constrain accepts more)"
            else:
                subset += 1
                kind = "constrain refuses, llguidance accepts"
            if shown < 30:
                shown += 1
                print(f"{kind}: {g['label'][:60]} text={t['text']!r} "
                      f"constrain=(prefix {t['prefix']}, accept {t['accept']}) llguidance=(prefix {p}, accept {a})")
    print(f"lark oracle: {len(corpus)} grammars, {total} texts; agree {agree}, "
          f"constrain stricter {subset}, constrain looser {unsound}"
          f" (and {raw_del} with a raw U+007F in a JSON string, valid JSON that llguidance refuses)")
    return 1 if unsound else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
