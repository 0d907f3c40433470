"""Fixtures: a tiny byte-level BPE tokenizer.json written here (hand-checkable
masks), the real Qwen tokenizer (``$CONSTRAIN_HOME/tokenizer.json``, fetched
by ``scripts/fetch-assets``) and the MaskBench dev half (``../shared``).
Tests whose asset is absent skip with a message saying so."""

import json
import os
import pathlib

import pytest

import constrain

REPO = pathlib.Path(__file__).resolve().parents[3]
SHARED = REPO.parent / "shared" / "corpora"
QWEN_TOKENIZER = (
    pathlib.Path(os.environ.get("CONSTRAIN_HOME", pathlib.Path.home() / ".cache" / "constrain"))
    / "tokenizer.json"
)
QWEN_LOGITS = 151_936


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (byte-level BPE)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


# ids 0..255: the single bytes; then these multi-byte tokens; then
# <|endoftext|> (EOS) and <tool_call> (an added, non-special token).
TINY_WORDS = [b"yes", b"no", b'{"', b'":', b"true", b"false", b"ab", b"12"]
TINY_EOS = 256 + len(TINY_WORDS)
TINY_TOOL = TINY_EOS + 1
TINY_WIDTH = 300  # logits width past the tokenizer's ids (padding)


def tiny_tokenizer_json():
    table = bytes_to_unicode()
    vocab = {table[b]: b for b in range(256)}
    for i, w in enumerate(TINY_WORDS):
        vocab["".join(table[b] for b in w)] = 256 + i
    return json.dumps(
        {
            "version": "1.0",
            "added_tokens": [
                {"id": TINY_EOS, "content": "<|endoftext|>", "special": True},
                {"id": TINY_TOOL, "content": "<tool_call>", "special": False},
            ],
            "model": {"type": "BPE", "vocab": vocab, "merges": []},
        }
    )


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    p.write_text(tiny_tokenizer_json())
    return p


@pytest.fixture(scope="session")
def tiny_info(tiny_path):
    return constrain.TokenizerInfo.from_tokenizer_json(str(tiny_path), vocab_size=TINY_WIDTH)


@pytest.fixture(scope="session")
def tiny_compiler(tiny_info):
    return constrain.Compiler(tiny_info)


@pytest.fixture(scope="session")
def qwen_info():
    if not QWEN_TOKENIZER.exists():
        pytest.skip(f"skipping: {QWEN_TOKENIZER} is absent (run scripts/fetch-assets)")
    return constrain.TokenizerInfo.from_tokenizer_json(str(QWEN_TOKENIZER), vocab_size=QWEN_LOGITS)


@pytest.fixture(scope="session")
def qwen_compiler(qwen_info):
    return constrain.Compiler(qwen_info)


class GreedyTokenizer:
    """Longest-match tokenization over the vocabulary's own token bytes: a
    valid token path for any text (not always the BPE one), written here
    independently of the Rust tokenizer."""

    def __init__(self, info):
        self.ids = {}
        for t in range(info.num_ids):
            b = info.token_bytes(t)
            if b is not None and b not in self.ids:
                self.ids[b] = t
        self.longest = max(len(b) for b in self.ids)

    def encode(self, text):
        data = text.encode("utf-8") if isinstance(text, str) else text
        out, i = [], 0
        while i < len(data):
            for n in range(min(self.longest, len(data) - i), 0, -1):
                t = self.ids.get(data[i : i + n])
                if t is not None:
                    out.append(t)
                    i += n
                    break
            else:
                raise ValueError(f"no token for byte {data[i]!r}")
        return out


@pytest.fixture(scope="session")
def tiny_tok(tiny_info):
    return GreedyTokenizer(tiny_info)


@pytest.fixture(scope="session")
def qwen_tok(qwen_info):
    return GreedyTokenizer(qwen_info)


def allowed_ids(bitmask_row, vocab_size):
    """Set bits of one int32 bitmask row (decoded in pure Python)."""
    out = []
    for w, word in enumerate(bitmask_row):
        word = int(word) & 0xFFFFFFFF
        while word:
            low = word & -word
            t = w * 32 + low.bit_length() - 1
            if t < vocab_size:
                out.append(t)
            word ^= low
    return out


class SGLangServerArgs:  # SGLang's, as far as the grammar-backend registry reads it
    grammar_backend = "constrain"


def sglang_backend(tiny_path, width=TINY_WIDTH):
    """SGLang's `base_grammar_backend` module and constrain's backend made by
    its registry for the tiny tokenizer (SGLang itself or its test double
    must be importable)."""
    from sglang.srt.constrained import base_grammar_backend as base

    import constrain.sglang

    constrain.sglang.register()
    text = tiny_path.read_text()

    class Backend:
        def to_str(self):
            return text

    class HFTokenizer:
        backend_tokenizer = Backend()
        eos_token_id = TINY_EOS

    return base, base.create_grammar_backend(SGLangServerArgs(), HFTokenizer(), width, {TINY_EOS})
