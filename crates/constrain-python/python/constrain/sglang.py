"""SGLang adapter: a grammar backend, so ``--grammar-backend constrain``
works::

    pip install constrain            # registers the sglang.srt.plugins entry point
    python -m sglang.launch_server --model-path Qwen/Qwen2.5-Coder-0.5B-Instruct \\
        --grammar-backend constrain

``register()`` (the ``sglang.srt.plugins`` entry point; call it yourself
before the server starts where plugins are not loaded) registers the backend
with SGLang's ``register_grammar_backend("constrain", factory)``; SGLang
calls ``factory(server_args, tokenizer, vocab_size, eos_token_ids)``.

The backend compiles ``json_schema``, ``regex``, ``ebnf`` and
``structural_tag`` requests (``ebnf`` read as GBNF, llama.cpp's format,
which XGrammar's EBNF follows, when it defines a rule with ``::=``, and as
Lark, llguidance's dialect, otherwise, as SGLang's llguidance backend
takes it);
each grammar object wraps one ``constrain.Matcher`` and implements SGLang's
``BaseGrammarObject``: ``accept_token``, ``rollback`` (up to 200 tokens, as
SGLang's XGrammar backend), ``is_terminated``, the vocab-mask trio
(``allocate_vocab_mask`` on the CPU, ``move_vocab_mask`` to the device,
``apply_vocab_mask`` there), ``fill_vocab_mask``, ``copy`` and jump-forward
(``try_jump_forward``, ``jump_forward_str_state``, ``jump_and_retokenize``).
"""

import json
import logging

from sglang.srt.constrained import base_grammar_backend as _base

from . import CompileError, Compiler, Matcher, TokenizerInfo, grammar_syntax
from ._apply import apply_bitmask

logger = logging.getLogger(__name__)

MAX_ROLLBACK_TOKENS = 200


def _invalid(message):
    """What SGLang takes for a refused grammar: an ``InvalidGrammarObject``
    carrying the reason (0.5.23; its scheduler copies and caches whatever
    comes back, so None takes the scheduler down), the ``INVALID_GRAMMAR_OBJ``
    sentinel before it, None before that."""
    cls = getattr(_base, "InvalidGrammarObject", None)
    if cls is not None:
        return cls(message)
    return getattr(_base, "INVALID_GRAMMAR_OBJ", None)


class ConstrainGrammar(_base.BaseGrammarObject):
    def __init__(self, compiled, vocab_size):
        super().__init__()
        self.compiled = compiled
        self.vocab_size = vocab_size
        self.matcher = Matcher(compiled, max_rollback_tokens=MAX_ROLLBACK_TOKENS)
        self.finished = False

    def accept_token(self, token):
        if self.matcher.is_terminated():
            return
        if not self.matcher.accept_token(token):
            raise ValueError(f"token {token} is not allowed by the grammar")

    def rollback(self, k):
        self.matcher.rollback(k)

    def is_terminated(self):
        return self.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size, batch_size, device):
        words = (vocab_size + 31) // 32
        try:
            import torch
        except ImportError:
            import numpy as np

            return np.full((batch_size, words), -1, dtype=np.int32)
        return torch.full((batch_size, words), -1, dtype=torch.int32)

    def fill_vocab_mask(self, vocab_mask, idx):
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def move_vocab_mask(vocab_mask, device):
        to = getattr(vocab_mask, "to", None)
        return vocab_mask if to is None else to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits, vocab_mask):
        apply_bitmask(logits, vocab_mask)

    def copy(self):
        return ConstrainGrammar(self.compiled, self.vocab_size)

    def try_jump_forward(self, tokenizer):
        s = self.matcher.find_jump_forward_string()
        return ([], s) if s else None

    def jump_forward_str_state(self, helper):
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids, new_output_ids, next_state):
        k = 0
        for old, new in zip(old_output_ids, new_output_ids):
            if old != new:
                break
            k += 1
        if k < len(old_output_ids):
            self.matcher.rollback(len(old_output_ids) - k)
        for t in new_output_ids[k:]:
            self.accept_token(t)


class ConstrainGrammarBackend(_base.BaseGrammarBackend):
    def __init__(self, tokenizer, vocab_size, eos_token_ids=None):
        super().__init__()
        stop = sorted(eos_token_ids) if eos_token_ids else None
        self.info = TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop)
        self.compiler = Compiler(self.info)
        self.vocab_size = vocab_size

    def _grammar(self, what, key_string, compile_):
        try:
            return ConstrainGrammar(compile_(), self.vocab_size)
        except (CompileError, ValueError) as e:
            logger.warning("constrain: skip invalid %s %r: %s", what, key_string[:200], e)
            return _invalid(f"constrain: {e}")

    def dispatch_json(self, key_string):
        schema = {} if key_string == "$$ANY$$" else key_string
        return self._grammar("json_schema", key_string, lambda: self.compiler.compile_json_schema(schema))

    def dispatch_regex(self, key_string):
        return self._grammar("regex", key_string, lambda: self.compiler.compile_regex(key_string))

    def dispatch_ebnf(self, key_string):
        # XGrammar's GBNF-like dialect (`root ::= ...`), or Lark.
        syntax = grammar_syntax(key_string)
        return self._grammar(
            "ebnf", key_string, lambda: self.compiler.compile_grammar(key_string, syntax=syntax)
        )

    def dispatch_structural_tag(self, key_string):
        # The JSON text of an XGrammar structural tag: the envelope
        # `{"type": "structural_tag", "format": ...}` or the legacy
        # `{"structures": [...], "triggers": [...]}` SGLang also sends.
        return self._grammar(
            "structural_tag", key_string, lambda: self.compiler.compile_structural_tag(key_string)
        )


def create_backend(server_args, tokenizer, vocab_size, eos_token_ids=None):
    """SGLang's backend factory signature."""
    return ConstrainGrammarBackend(tokenizer, vocab_size, eos_token_ids)


def register():
    """Registers ``--grammar-backend constrain`` (the sglang.srt.plugins entry point)."""
    _base.register_grammar_backend("constrain", create_backend)
