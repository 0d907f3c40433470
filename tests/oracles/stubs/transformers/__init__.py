"""Stand-in for transformers: xgrammar imports these names, the grammar API never uses them."""
class PreTrainedTokenizerBase:
    pass
class PreTrainedTokenizerFast(PreTrainedTokenizerBase):
    pass
class LogitsProcessor:
    pass
