"""vLLM adapter: a V1 logits processor, registered through the
``vllm.logits_processors`` entry point (installed with the wheel; vLLM then
loads it into every engine, and ``--logits-processors`` naming it as well
loads a second copy), taking the constraint per request from ``vllm_xargs``::

    vllm serve Qwen/Qwen2.5-Coder-0.5B-Instruct
    # per request (OpenAI API): extra_body={"vllm_xargs": {"constrain_json": "<schema>"}}
    #   or {"constrain_regex": "<regex>"}
    #   or {"constrain_grammar": "<Lark or GBNF>"} (GBNF when it holds "::=", as vLLM's grammar)
    #   or {"constrain_structural_tag": {"type": "structural_tag", "format": {...}}}

It implements vLLM's ``vllm.v1.sample.logits_processor.LogitsProcessor``:
``validate_params`` (rejects malformed ``constrain_*`` arguments),
``update_state`` (the batch's removed, added and moved requests, in that
order, then each tracked request's new output tokens from its live
``output_tok_ids`` list) and ``apply`` (fills the rows of the constrained
requests in parallel on the CPU, copies the bitmask to the logits' device
and masks there). Where a document may end, its row allows the tokens vLLM
ends that request on (``SamplingParams``' EOS and ``stop_token_ids``), not
the tokenizer's stop tokens; a finished document allows stop tokens only.

Limits of vLLM's custom logits processors: they see no rollback, and vLLM
refuses them with speculative decoding; use the SGLang backend (rollback and
jump-forward) where those matter. The tokenizer is read from the model's
``tokenizer.json`` (a local model directory), or through
``transformers.AutoTokenizer`` otherwise; ``CONSTRAIN_TOKENIZER_JSON`` names
the file explicitly.
"""

import json
import logging
import os

from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from . import Compiler, Matcher, TokenizerInfo, fill_next_token_bitmask_batch, grammar_syntax
from ._apply import apply_bitmask

logger = logging.getLogger(__name__)

KEYS = ("constrain_json", "constrain_regex", "constrain_grammar", "constrain_structural_tag")


def _source(params):
    """(kind, text) of a request's constraint, or None; ValueError when malformed."""
    xargs = getattr(params, "extra_args", None) or {}
    found = [k for k in KEYS if xargs.get(k) is not None]
    if not found:
        return None
    if len(found) > 1:
        raise ValueError(f"give one of {', '.join(KEYS)}, not {' and '.join(found)}")
    key = found[0]
    value = xargs[key]
    if key in ("constrain_json", "constrain_structural_tag"):
        what = "a JSON Schema" if key == "constrain_json" else "a structural tag"
        if isinstance(value, str):
            try:
                json.loads(value)
            except json.JSONDecodeError as e:
                raise ValueError(f"{key} is not valid JSON: {e}") from None
        elif isinstance(value, (dict, bool)):
            value = json.dumps(value)
        else:
            raise ValueError(f"{key} must be {what} (text or object), not {type(value).__name__}")
    elif not isinstance(value, str):
        raise ValueError(f"{key} must be a string, not {type(value).__name__}")
    return key, value


def _tokenizer_info(vllm_config):
    model_config = vllm_config.model_config
    vocab_size = model_config.get_vocab_size()
    path = os.environ.get("CONSTRAIN_TOKENIZER_JSON")
    if path is None:
        tok = getattr(model_config, "tokenizer", None) or model_config.model
        candidate = os.path.join(str(tok), "tokenizer.json")
        if os.path.isfile(candidate):
            path = candidate
    if path is not None:
        return TokenizerInfo.from_tokenizer_json(path, vocab_size=vocab_size)
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(tok)
    return TokenizerInfo.from_huggingface(hf, vocab_size=vocab_size)


def _ends(params, vocab_size):
    """The tokens on which vLLM ends the request: its EOS (vLLM leaves
    ``eos_token_id`` unset under ``ignore_eos``) and its ``stop_token_ids``
    (the generation config's EOS ids among them)."""
    ids = set(getattr(params, "stop_token_ids", None) or ())
    eos = getattr(params, "eos_token_id", None)
    if eos is not None and not getattr(params, "ignore_eos", False):
        ids.add(eos)
    return tuple(sorted(i for i in ids if 0 <= i < vocab_size))


class _Request:
    __slots__ = ("matcher", "output", "seen", "failed", "ends")

    def __init__(self, matcher, output, ends):
        # None: the constraint did not compile; the row then allows only the
        # stop tokens, so the request ends at once (never unconstrained).
        self.matcher = matcher
        self.output = output  # vLLM's live list of the request's output ids
        self.seen = 0
        self.failed = False
        # The tokens vLLM ends this request on; where the document may end,
        # the row allows these rather than the tokenizer's stop tokens (a
        # model's EOS set can be narrower: vLLM would go on past a stop
        # token it does not know). Empty: the tokenizer's stop tokens.
        self.ends = ends


class ConstrainLogitsProcessor(LogitsProcessor):
    @classmethod
    def validate_params(cls, sampling_params):
        _source(sampling_params)

    def __init__(self, vllm_config, device, is_pin_memory):
        self.device = device
        self.info = _tokenizer_info(vllm_config)
        self.compiler = Compiler(self.info)
        self.requests = {}
        self.bitmask = None
        self.stops = tuple(self.info.stop_token_ids)

    def is_argmax_invariant(self):
        return False

    def _compile(self, kind, text):
        if kind == "constrain_json":
            return self.compiler.compile_json_schema(text)
        if kind == "constrain_structural_tag":
            return self.compiler.compile_structural_tag(text)
        if kind == "constrain_grammar":
            return self.compiler.compile_grammar(text, syntax=grammar_syntax(text))
        return self.compiler.compile_regex(text)

    def update_state(self, batch_update):
        if batch_update is not None:
            for index in batch_update.removed:
                self.requests.pop(index, None)
            for index, params, _prompt, output in batch_update.added:
                src = _source(params)
                if src is None:
                    self.requests.pop(index, None)
                    continue
                try:
                    matcher = Matcher(self._compile(*src))
                except (ValueError, OSError) as e:
                    # validate_params has no tokenizer, so a schema or regex
                    # that does not compile is found here, inside the engine's
                    # step: raising would take every request down with it.
                    logger.error("constrain: row %d: %s; the request is ended", index, e)
                    matcher = None
                self.requests[index] = _Request(matcher, output, _ends(params, self.info.vocab_size))
            for a, b, direction in batch_update.moved:
                ra = self.requests.pop(a, None)
                rb = self.requests.pop(b, None)
                if ra is not None:
                    self.requests[b] = ra
                if direction == MoveDirectionality.SWAP and rb is not None:
                    self.requests[a] = rb
        for index, r in self.requests.items():
            while r.seen < len(r.output) and not r.failed:
                t = r.output[r.seen]
                r.seen += 1
                if r.matcher is None or r.matcher.is_terminated():
                    continue
                if r.matcher.accept_token(t):
                    continue
                if t in r.ends and r.matcher.accept_token(self.stops[0]):
                    continue  # vLLM's own stop token, where the document may end
                # Cannot happen when the mask was applied; the request
                # then goes on unconstrained rather than stalling the batch.
                logger.warning("constrain: row %d: token %d refused; unconstrained from here", index, t)
                r.failed = True

    def apply(self, logits):
        live = [
            i for i, r in self.requests.items()
            if i < logits.shape[0] and not r.failed
        ]
        rows, ended = [], []
        for i in live:
            m = self.requests[i].matcher
            # A finished document allows only the stop tokens: vLLM may go
            # on past one (ignore_eos, a stop token it does not end on).
            (ended if m is None or m.is_terminated() else rows).append(i)
        if not rows and not ended:
            return logits
        batch = int(logits.shape[0])
        if self.bitmask is None or self.bitmask.shape[0] < batch:
            from . import allocate_token_bitmask

            self.bitmask = allocate_token_bitmask(max(batch, 8), self.info.vocab_size)
        if rows:
            fill_next_token_bitmask_batch([self.requests[i].matcher for i in rows], self.bitmask, indices=rows)
            for i in rows:
                self._engine_stops(i)
        for i in ended:
            self._stop_only(i)
        apply_bitmask(logits, self.bitmask[:batch], indices=rows + ended)
        return logits

    def _stop_only(self, i):
        """Row i of the bitmask allows the stop tokens and nothing else."""
        words = self.bitmask[i].view("uint32")
        words[:] = 0
        for t in self.requests[i].ends or self.stops:
            words[t // 32] |= 1 << (t % 32)

    def _engine_stops(self, i):
        """Where row i allows a stop token, it allows the request's own
        (``_Request.ends``) instead of the tokenizer's."""
        ends = self.requests[i].ends
        if not ends or set(ends) == set(self.stops):
            return
        words = self.bitmask[i].view("uint32")
        if not any(int(words[t // 32]) >> (t % 32) & 1 for t in self.stops):
            return
        for t in self.stops:
            words[t // 32] &= ~(1 << (t % 32)) & 0xFFFFFFFF
        for t in ends:
            words[t // 32] |= 1 << (t % 32)
