"""Hugging Face ``transformers`` adapter::

    import constrain, constrain.hf
    info = constrain.TokenizerInfo.from_huggingface(tokenizer, vocab_size=model.config.vocab_size)
    compiled = constrain.Compiler(info).compile_json_schema(schema)
    out = model.generate(**inputs, logits_processor=[constrain.hf.LogitsProcessor(compiled)])

``LogitsProcessor`` follows transformers' ``LogitsProcessor`` protocol
(``__call__(input_ids, scores) -> scores``, batch rows in a fixed order): at
the first call it records the prompt length and makes one matcher per row;
at every later call it feeds each row's newest token to its matcher, then
masks the scores. A row whose matcher has taken a stop token is left alone
(transformers pads finished rows). One processor serves one ``generate``
call; make a new one for the next.
"""

from . import Matcher, allocate_token_bitmask, fill_next_token_bitmask_batch
from ._apply import apply_bitmask


class LogitsProcessor:
    def __init__(self, compiled, override_stop_tokens=None):
        self.compiled = compiled
        self.override_stop_tokens = override_stop_tokens
        self.matchers = None
        self.prompt_len = None
        self.vocab_size = compiled.tokenizer_info.vocab_size
        self.bitmask = None

    def __call__(self, input_ids, scores):
        batch, seq_len = int(input_ids.shape[0]), int(input_ids.shape[1])
        if self.matchers is None:
            self.prompt_len = seq_len
            self.matchers = [
                Matcher(self.compiled, override_stop_tokens=self.override_stop_tokens)
                for _ in range(batch)
            ]
            self.bitmask = allocate_token_bitmask(batch, self.vocab_size)
        else:
            if batch != len(self.matchers):
                raise ValueError(
                    f"batch size changed from {len(self.matchers)} to {batch}: one "
                    "LogitsProcessor serves one generate() call"
                )
            for i, m in enumerate(self.matchers):
                if m.is_terminated():
                    continue
                t = int(input_ids[i, -1])
                if not m.accept_token(t):
                    raise RuntimeError(
                        f"row {i}: token {t} is not allowed by the constraint (was the "
                        "mask applied before sampling?)"
                    )
        live = [i for i, m in enumerate(self.matchers) if not m.is_terminated()]
        if live:
            fill_next_token_bitmask_batch([self.matchers[i] for i in live], self.bitmask, indices=live)
            apply_bitmask(scores, self.bitmask, indices=live)
        return scores
