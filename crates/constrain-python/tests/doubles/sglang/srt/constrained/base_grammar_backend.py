"""Double of sglang.srt.constrained.base_grammar_backend (SGLang's grammar
backend interface, python/sglang/srt/constrained/base_grammar_backend.py):
the registry, the factory call, the key-type dispatch and the grammar
object's methods the scheduler calls, as SGLang 0.5.23 has them (a refused
grammar is an InvalidGrammarObject carrying its reason)."""

GRAMMAR_BACKEND_REGISTRY = {}


class BaseGrammarObject:
    def __init__(self):
        self._finished = False
        self.grammar_stats = None

    @property
    def finished(self):
        return self._finished

    @finished.setter
    def finished(self, finished):
        self._finished = finished

    def accept_token(self, token):
        raise NotImplementedError

    def rollback(self, k):
        raise NotImplementedError

    def is_terminated(self):
        return False

    def allocate_vocab_mask(self, vocab_size, batch_size, device):
        raise NotImplementedError

    def fill_vocab_mask(self, vocab_mask, idx):
        raise NotImplementedError

    @staticmethod
    def move_vocab_mask(vocab_mask, device):
        raise NotImplementedError

    @staticmethod
    def apply_vocab_mask(logits, vocab_mask):
        raise NotImplementedError

    def copy(self):
        return self

    def try_jump_forward(self, tokenizer):
        return None

    def jump_forward_str_state(self, helper):
        raise NotImplementedError

    def jump_and_retokenize(self, old_output_ids, new_output_ids, next_state):
        raise NotImplementedError


class InvalidGrammarObject(BaseGrammarObject):
    def __init__(self, error_message="Unknown grammar error"):
        super().__init__()
        self.error_message = error_message


class BaseGrammarBackend:
    def __init__(self):
        self.cache = {}

    def _init_value_dispatch(self, key, require_reasoning):
        key_type, key_string = key
        if key_type == "json":
            return self.dispatch_json(key_string)
        if key_type == "regex":
            return self.dispatch_regex(key_string)
        if key_type == "ebnf":
            return self.dispatch_ebnf(key_string)
        if key_type == "structural_tag":
            return self.dispatch_structural_tag(key_string)
        return InvalidGrammarObject(f"unknown key type {key_type}")


def register_grammar_backend(name, init_func):
    GRAMMAR_BACKEND_REGISTRY[name] = init_func


def create_grammar_backend(server_args, tokenizer, vocab_size, eos_token_ids=None):
    name = server_args.grammar_backend
    if name in GRAMMAR_BACKEND_REGISTRY:
        return GRAMMAR_BACKEND_REGISTRY[name](server_args, tokenizer, vocab_size, eos_token_ids)
    raise ValueError(f"unknown grammar backend {name}")
