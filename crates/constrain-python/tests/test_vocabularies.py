"""The Python API over the vocabularies beyond Qwen that ``scripts/fetch-assets
--tokenizers`` fetches into ``$CONSTRAIN_HOME/tokenizers/NAME/`` (Llama 3,
DeepSeek V3, gpt-oss: byte-level BPE; Llama 2, Gemma 3: SentencePiece with
byte fallback); each absent one skips with a message.

``TokenizerInfo.from_tokenizer_json`` finds the stop tokens the CLI finds
(including those the ``tokenizer_config.json`` beside the file names), ids
past the tokenizer are never allowed, every filled bitmask equals the core's
mask (decoded independently), valid MaskBench instances and regex texts are
accepted then stopped, and invalid ones (``jsonschema`` as the oracle) are
refused."""

import json
import os
import pathlib
import re

import pytest

import constrain
from conftest import SHARED, GreedyTokenizer, allowed_ids

jsonschema = pytest.importorskip("jsonschema", reason="skipping: jsonschema is not installed")

HOME = pathlib.Path(os.environ.get("CONSTRAIN_HOME", pathlib.Path.home() / ".cache" / "constrain"))
# name -> stop tokens that must be among the defaults
VOCABS = {
    "llama3": ["<|end_of_text|>", "<|eot_id|>"],
    "llama2": ["</s>"],
    "gemma3": ["<eos>", "<end_of_turn>"],
    "deepseek_v3": ["<｜end▁of▁sentence｜>"],
    "gptoss": ["<|return|>", "<|call|>", "<|endoftext|>"],
}
FILES = ["Github_easy---o10011.json", "WashingtonPost---wp_88_Normalized.json"]
REGEX = r"(héllo|日本語|ü+|\n\n|   x){1,4}"
REGEX_TEXTS = [("héllo", True), ("日本語\n\nüü", True), ("   x   x", True), ("hello", False), ("日本", False)]
PAD = 64  # logits width past the tokenizer's ids


def walk(compiled, info, tokens, check_every):
    """Feeds `tokens` then a stop token through filled bitmasks: True when
    every token is set in its bitmask (and accepted) and a stop token is set
    at the end. Every `check_every`-th bitmask is compared with the core's."""
    m = constrain.Matcher(compiled)
    bm = constrain.allocate_token_bitmask(1, info.vocab_size)
    for i, t in enumerate(tokens + [None]):
        m.fill_next_token_bitmask(bm)
        if i % check_every == 0 or t is None:
            got = allowed_ids(bm[0], info.vocab_size)
            assert got == compiled._core_allowed(tokens[:i]), f"mask differs at step {i}"
            assert all(g < info.num_ids for g in got), "an id past the tokenizer is allowed"
        if t is None:
            break
        if not (int(bm[0, t // 32]) >> (t % 32)) & 1:
            assert not m.accept_token(t), "a token out of the bitmask was accepted"
            return False
        assert m.accept_token(t)
    stops = [s for s in info.stop_token_ids if (int(bm[0, s // 32]) >> (s % 32)) & 1]
    return bool(stops) and m.accept_token(stops[0]) and m.is_terminated()


@pytest.mark.parametrize("name", list(VOCABS))
def test_vocabulary(name):
    path = HOME / "tokenizers" / name / "tokenizer.json"
    if not path.exists():
        pytest.skip(f"skipping: {name} tokenizer not found at {path} (run scripts/fetch-assets --tokenizers)")
    raw = json.loads(path.read_text())
    ids = {t["content"]: t["id"] for t in raw.get("added_tokens", [])}
    probe = constrain.TokenizerInfo.from_tokenizer_json(str(path))
    info = constrain.TokenizerInfo.from_tokenizer_json(str(path), vocab_size=probe.num_ids + PAD)
    for s in VOCABS[name]:
        assert ids[s] in info.stop_token_ids, f"{name}: stop token {s} missing from {info.stop_token_ids}"
    assert all(info.token_bytes(s) is None for s in info.stop_token_ids)
    tok = GreedyTokenizer(info)
    compiler = constrain.Compiler(info)
    accepted = refused = 0
    for f in FILES:
        p = SHARED / "maskbench-dev" / f
        if not p.exists():
            pytest.skip(f"skipping: {p} is absent (the MaskBench dev half lives in ../shared)")
        doc = json.loads(p.read_text())
        compiled = compiler.compile_json_schema(doc["schema"], whitespace="flexible", strict=False)
        validator = jsonschema.validators.validator_for(doc["schema"])(doc["schema"])
        for case in doc["tests"]:
            text = json.dumps(case["data"])
            valid = validator.is_valid(case["data"])
            ok = walk(compiled, info, tok.encode(text), check_every=7)
            assert ok == valid, f"{name} {f}: {'valid' if valid else 'invalid'} {text} was {'accepted' if ok else 'refused'}"
            accepted += ok
            refused += not ok
    compiled = compiler.compile_regex(REGEX)
    for text, valid in REGEX_TEXTS:
        assert bool(re.fullmatch(REGEX, text)) == valid
        ok = walk(compiled, info, tok.encode(text), check_every=1)
        assert ok == valid, f"{name}: regex text {text!r}"
        accepted += ok
        refused += not ok
    assert accepted >= 4 and refused >= 4
