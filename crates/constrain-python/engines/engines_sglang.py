"""SGLang checks for check_engines.py.

* ``sglang-backend``: ``constrain.sglang`` registered through SGLang's own
  ``register_grammar_backend`` and created by its ``create_grammar_backend``
  (``--grammar-backend constrain``), its grammar objects subclassing the real
  ``BaseGrammarObject``; the scheduler's loop (jump-forward, allocate / fill
  / move / apply the vocab mask on torch tensors, accept, rollback) on the
  real Qwen tokenizer; JSON Schema, regex and Lark (``dispatch_ebnf``)
  outputs validate; malformed constraints come back as SGLang's
  ``INVALID_GRAMMAR_OBJ``.
"""

import json
import re


class _ServerArgs:  # what SGLang's registry reads
    grammar_backend = "constrain"


SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["ok", "n"],
}


def backend(need, Skip, tiny_model_dir, root):
    torch = need("torch")
    transformers = need("transformers")
    need("sglang")
    base = need("sglang.srt.constrained.base_grammar_backend")
    import jsonschema

    import constrain.sglang

    assert issubclass(constrain.sglang.ConstrainGrammar, base.BaseGrammarObject)
    assert issubclass(constrain.sglang.ConstrainGrammarBackend, base.BaseGrammarBackend)
    constrain.sglang.register()
    d = tiny_model_dir(root)
    tok = transformers.AutoTokenizer.from_pretrained(d)
    V = 151936
    eos = {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}
    be = base.create_grammar_backend(_ServerArgs(), tok, V, eos)
    invalid = getattr(base, "INVALID_GRAMMAR_OBJ", None)
    for bad in [("json", '{"type": "nope"}'), ("regex", "(unclosed"), ("ebnf", 'start: ("a"')]:
        assert be._init_value_dispatch(bad) is invalid, bad
    cases = [
        (("json", json.dumps(SCHEMA)), lambda s: jsonschema.validate(json.loads(s), SCHEMA)),
        (("regex", "(yes|no)-[0-9]{2}"), lambda s: re.fullmatch("(yes|no)-[0-9]{2}", s) or 1 / 0),
        (("ebnf", 'start: "id-" /[0-9]{3}/ ("," "id-" /[0-9]{3}/)?'), lambda s: re.fullmatch(r"id-\d{3}(,id-\d{3})?", s) or 1 / 0),
    ]
    gen = torch.Generator().manual_seed(3)
    jumps = 0
    for key, validate in cases:
        g = be._init_value_dispatch(key)
        assert g is not invalid, key
        out = []
        mask = g.allocate_vocab_mask(V, 1, "cpu")
        for _ in range(200):
            if g.is_terminated():
                break
            helper = g.try_jump_forward(tok)
            if helper is not None:
                s, state = g.jump_forward_str_state(helper)
                old = list(out)
                new = tok.encode(tok.decode(out) + s, add_special_tokens=False)
                g.jump_and_retokenize(old, new, state)
                out = new
                jumps += 1
                continue
            g.fill_vocab_mask(mask, 0)
            dev = g.move_vocab_mask(mask, "cpu")
            logits = torch.randn(1, V, generator=gen)
            for e in eos:
                logits[0, e] += 2.0
            g.apply_vocab_mask(logits, dev)
            t = int(torch.argmax(logits[0]))
            g.accept_token(t)
            if t not in eos:
                out.append(t)
        assert g.is_terminated(), key
        validate(tok.decode(out))
        # rollback, as speculative decoding does
        g2 = g.copy()
        for t in out:
            g2.accept_token(t)
        g2.rollback(min(2, len(out)))
        for t in out[-min(2, len(out)):]:
            g2.accept_token(t)
    import sglang

    return f"sglang {sglang.__version__}: real base classes, 3 constraints valid, {jumps} jump-forwards"


def run(check, Skip, need, root, tiny_model_dir):
    check("sglang-backend", backend, need, Skip, tiny_model_dir, root)
