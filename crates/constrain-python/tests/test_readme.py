"""The README's Python example, run as written (after "pip install .",
the README's Python example works): the block is read out of
README.md, `tokenizer.json` points at the real Qwen tokenizer and
`model_step()` returns seeded random logits (almost all of their mass on
tokens the schema forbids). The example must stop on its own, and the text it generated must be JSON that satisfies the schema,
checked with the `jsonschema` package as the oracle."""

import json
import re

import numpy as np
import pytest

import constrain
from conftest import QWEN_TOKENIZER, REPO

SECTION = "## Python: the `constrain` package"
WIDTH = 151_936  # the example's vocab_size
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def readme_example():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    at = text.index(SECTION)
    block = re.search(r"```python\n(.*?)```", text[at:], re.S)
    assert block, "the README's Python section has no python block"
    return block.group(1)


class Recording:
    """`constrain.Matcher` keeping the tokens it accepted."""

    def __init__(self, compiled, *args, **kwargs):
        self.inner = constrain.Matcher(compiled, *args, **kwargs)
        self.tokens = []

    def accept_token(self, token):
        ok = self.inner.accept_token(token)
        if ok:
            self.tokens.append(token)
        return ok

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_readme_example_runs_and_its_output_validates(seed):
    if not QWEN_TOKENIZER.exists():
        pytest.skip(f"the Qwen tokenizer is absent ({QWEN_TOKENIZER}; scripts/fetch-assets fetches it)")
    jsonschema = pytest.importorskip("jsonschema", reason="the jsonschema package is the oracle here")
    code = readme_example()
    assert "import constrain, numpy as np" in code and f"vocab_size={WIDTH}" in code
    assert json.dumps(SCHEMA) in code, "the test's schema is the example's"
    code = code.replace("import constrain, numpy as np", "").replace('"tokenizer.json"', repr(str(QWEN_TOKENIZER)))
    rng = np.random.default_rng(seed)
    steps = []

    def model_step():
        steps.append(1)
        assert len(steps) < 20_000, "the example did not stop"
        return (rng.standard_normal(WIDTH) * 4).astype(np.float32)

    fake = type("module", (), {})()
    for name in dir(constrain):
        if not name.startswith("__"):
            setattr(fake, name, getattr(constrain, name))
    fake.Matcher = Recording
    env = {"constrain": fake, "np": np, "model_step": model_step}
    exec(compile(code, "README.md (Python example)", "exec"), env)
    matcher, info = env["matcher"], env["info"]
    assert matcher.is_terminated()
    *body, stop = matcher.tokens
    assert stop in info.stop_token_ids
    text = b"".join(info.token_bytes(t) for t in body).decode("utf-8")
    jsonschema.validate(json.loads(text), SCHEMA)
