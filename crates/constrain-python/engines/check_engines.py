"""Engine checks: constrain inside the real engines (run by
scripts/test-engines in its own venv; never part of the default tests).

Each check prints one line, ``PASS name -- detail``, ``FAIL name -- detail``
or ``SKIP name -- blocker``, and the run ends with ``N passed, N failed, N
skipped``. A SKIP names what could not be had (the package that would not
install or import, with its error), so "could not run here" never reads as a
pass. The exit status is 1 when a check failed, else 0.

Checks:

* ``torch-apply``: ``apply_token_bitmask_inplace`` on torch tensors.
* ``hf-tiny-*``: transformers' ``model.generate(..., logits_processor=[...])``
  with ``constrain.hf.LogitsProcessor`` on a tiny random-weight Qwen2
  written as a Hugging Face folder (config, safetensors, the real Qwen
  ``tokenizer.json``): batch of 4 prompts of different lengths, left padded,
  greedy and sampled; every output validates against its JSON Schema.
* ``hf-0.5b-*``: the same on Qwen2.5-Coder-0.5B-Instruct, loaded by
  transformers from constrain's GGUF (``gguf_file=``, the ``gguf`` package).
* ``vllm-*`` and ``sglang-*``: see ``engines_vllm.py``/``engines_sglang.py``.
"""

import json
import os
import pathlib
import sys
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

RESULTS = []


def report(status, name, detail):
    detail = " ".join(str(detail).split())
    RESULTS.append(status)
    print(f"{status} {name} -- {detail}", flush=True)


def check(name, fn, *args):
    """Runs ``fn``; its return value is the PASS detail; ``Skip`` skips."""
    t0 = time.time()
    try:
        detail = fn(*args)
    except Skip as e:
        report("SKIP", name, str(e))
        return False
    except Exception as e:  # the failure itself is the finding
        tb = traceback.format_exc().strip().splitlines()
        report("FAIL", name, f"{type(e).__name__}: {e} [{tb[-3].strip() if len(tb) > 2 else ''}]")
        return False
    report("PASS", name, f"{detail} ({time.time() - t0:.1f} s)")
    return True


class Skip(Exception):
    pass


def need(module, why=""):
    """Imports ``module`` or skips, naming the import error."""
    import importlib

    try:
        return importlib.import_module(module)
    except Exception as e:
        failed = ""
        path = os.environ.get("CONSTRAIN_PIP_FAILURES")
        if path and os.path.isfile(path):
            top = module.split(".")[0]
            label = {"gguf": "transformers"}.get(top, top)
            lines = [l for l in pathlib.Path(path).read_text().splitlines() if l.startswith(label)]
            failed = "; ".join(lines[:3])
        raise Skip(
            f"import {module} failed: {type(e).__name__}: {e} {why} {failed}".strip()
        ) from None


CACHE = pathlib.Path(os.environ.get("CONSTRAIN_CACHE", pathlib.Path.home() / ".cache" / "constrain"))
TOKENIZER = CACHE / "tokenizer.json"
GGUF = CACHE / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

SCHEMAS = [
    {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
        "required": ["name", "age"],
    },
    {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
        "required": ["ok", "tags"],
    },
]
PROMPTS = [
    "Give me a person as JSON.",
    "JSON please:",
    "Write one JSON object describing someone who lives in a small town by the sea.",
    "Hi",
]


def tiny_model_dir(root):
    """A tiny random-weight Qwen2 as a Hugging Face folder, with the real Qwen tokenizer."""
    torch = need("torch")
    transformers = need("transformers")
    if not TOKENIZER.is_file():
        raise Skip(f"{TOKENIZER} is absent (scripts/fetch-assets fetches it)")
    d = root / "tiny-qwen2-h64"
    if (d / "config.json").is_file():
        return d
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(
        vocab_size=151936,
        # head_dim 64: vLLM's CPU attention refuses 16 ("Unsupported CPU
        # attention configuration: head_dim=16").
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=151643,
        eos_token_id=151645,
    )
    model = transformers.Qwen2ForCausalLM(cfg)
    model.save_pretrained(d, safe_serialization=True)
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(TOKENIZER), eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tok.save_pretrained(d)
    return d


def hf_generate(model, tok, schema, sample, max_new_tokens):
    """A batch of 4 left-padded prompts under ``schema``; every output validates."""
    import torch

    import constrain
    import constrain.hf
    import jsonschema

    info = constrain.TokenizerInfo.from_huggingface(tok, vocab_size=model.config.vocab_size)
    compiled = constrain.Compiler(info).compile_json_schema(schema, any_whitespace=True, max_whitespace_cnt=1)
    tok.padding_side = "left"
    batch = tok(PROMPTS, return_tensors="pt", padding=True)
    lens = batch["attention_mask"].sum(1).tolist()
    if len(set(lens)) == 1:
        raise AssertionError("the prompts should have different lengths (left padding)")
    torch.manual_seed(1)
    kwargs = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0) if sample else dict(do_sample=False)
    out = model.generate(
        **batch,
        max_new_tokens=max_new_tokens,
        logits_processor=[constrain.hf.LogitsProcessor(compiled)],
        pad_token_id=tok.pad_token_id,
        eos_token_id=info.stop_token_ids,
        **kwargs,
    )
    gen = out[:, batch["input_ids"].shape[1]:]
    docs = []
    stops = set(info.stop_token_ids)
    for row in gen.tolist():
        ids = []
        for t in row:
            if t in stops:
                break
            ids.append(t)
        else:
            raise AssertionError(f"no stop token within {max_new_tokens} tokens: {tok.decode(ids)!r}")
        text = tok.decode(ids)
        doc = json.loads(text)
        jsonschema.validate(doc, schema)
        docs.append(text)
    return "4 rows valid: " + " | ".join(d[:40] for d in docs[:2])


def hf_tiny(root, sample):
    transformers = need("transformers")
    need("torch")
    d = tiny_model_dir(root)
    model = transformers.AutoModelForCausalLM.from_pretrained(d)
    tok = transformers.AutoTokenizer.from_pretrained(d)
    # Random weights wander: a generous budget (each output must still end).
    return hf_generate(model, tok, SCHEMAS[0 if sample else 1], sample, 160)


_REAL = {}


def hf_real_model():
    transformers = need("transformers")
    need("torch")
    need("gguf", "(transformers reads GGUF files through it)")
    if not GGUF.is_file():
        raise Skip(f"{GGUF} is absent (scripts/fetch-assets fetches it)")
    if "model" not in _REAL:
        # The tokenizer transformers 5 rebuilds from the GGUF numbers four
        # tokens past the model's 151936 logits (<tool_response>, <think>
        # and their closers at 151936-151939), which no logit can choose and
        # TokenizerInfo refuses; the model's own tokenizer.json has none.
        if not TOKENIZER.is_file():
            raise Skip(f"{TOKENIZER} is absent (scripts/fetch-assets fetches it)")
        _REAL["tok"] = transformers.PreTrainedTokenizerFast(
            tokenizer_file=str(TOKENIZER), eos_token="<|im_end|>", pad_token="<|endoftext|>"
        )
        _REAL["model"] = transformers.AutoModelForCausalLM.from_pretrained(str(GGUF.parent), gguf_file=GGUF.name)
        _REAL["model"].eval()
    return _REAL["model"], _REAL["tok"]


def real_model_dir(root):
    """Qwen2.5-Coder-0.5B as a Hugging Face folder (bf16 safetensors, the
    model's ``tokenizer.json``), from the weights transformers dequantized
    out of the GGUF, for the vLLM and SGLang checks. Written by hand:
    ``save_pretrained`` refuses a model loaded from a GGUF ("quantized with
    gguf and is not serializable")."""
    d = root / "qwen2.5-coder-0.5b"
    if (d / "config.json").is_file():
        return d
    import shutil

    import torch
    from safetensors.torch import save_file

    model, tok = hf_real_model()
    tmp = root / "qwen2.5-coder-0.5b.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    cfg = model.config.to_dict()
    cfg.pop("quantization_config", None)
    cfg["torch_dtype"] = cfg["dtype"] = "bfloat16"
    cfg["architectures"] = cfg.get("architectures") or [type(model).__name__]  # SGLang reads it
    weights = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    if cfg.get("tie_word_embeddings"):
        weights.pop("lm_head.weight", None)  # the embedding's, shared
    save_file(weights, tmp / "model.safetensors", metadata={"format": "pt"})
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
    model.generation_config.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.rename(d)
    return d


def hf_real(sample):
    import torch

    torch.set_num_threads(int(os.environ.get("CONSTRAIN_THREADS", "2")))
    model, tok = hf_real_model()
    with torch.no_grad():
        return hf_generate(model, tok, SCHEMAS[0], sample, 48)


def torch_apply():
    torch = need("torch")
    import constrain

    bm = constrain.allocate_token_bitmask(2, 151936)
    bm[0] = 0
    bm[0, 3] = 1 << 5
    lg = torch.zeros(2, 151936, dtype=torch.bfloat16)
    constrain.apply_token_bitmask_inplace(lg, bm)
    allowed = torch.isfinite(lg[0].float()).nonzero().flatten().tolist()
    assert allowed == [3 * 32 + 5], allowed
    assert torch.isfinite(lg[1].float()).all()
    try:
        constrain.apply_token_bitmask_inplace(torch.zeros(3, 151936), bm)
    except ValueError:
        pass
    else:
        raise AssertionError("a batch-size mismatch did not raise")
    return f"torch {torch.__version__}: bf16 logits masked, mismatch raises"


def delegate(group, python, only):
    """Runs the ``group`` checks under ``python`` (the engine's venv), echoing
    and counting their lines; a missing venv is one SKIP."""
    import subprocess

    if not python or os.path.abspath(os.path.dirname(os.path.dirname(python))) == os.path.abspath(sys.prefix):
        return False
    if not os.path.isfile(python):
        report("SKIP", group, f"{python} is absent (scripts/test-engines makes the {group} venv)")
        return True
    picked = [o for o in only if o.startswith(group) or group.startswith(o)] or [group]
    env = dict(os.environ, CONSTRAIN_ENGINES_CHILD="1")
    p = subprocess.Popen([python, __file__, *picked], stdout=subprocess.PIPE, text=True, env=env)
    for line in p.stdout:
        status = line.split(" ", 1)[0]
        if status in ("PASS", "FAIL", "SKIP"):
            RESULTS.append(status)
        print(line, end="", flush=True)
    if p.wait() != 0 and not RESULTS:
        report("FAIL", group, f"{python} exited {p.returncode}")
    return True


def main():
    root = pathlib.Path(os.environ.get("CONSTRAIN_ENGINES_DIR", HERE.parents[2] / "target" / "engines"))
    root.mkdir(parents=True, exist_ok=True)
    only = sys.argv[1:]
    child = os.environ.get("CONSTRAIN_ENGINES_CHILD") == "1"

    def want(prefix):
        return not only or any(prefix.startswith(o) or o.startswith(prefix) for o in only)

    if want("torch"):
        check("torch-apply", torch_apply)
    if want("hf-tiny"):
        check("hf-tiny-greedy", hf_tiny, root, False)
        check("hf-tiny-sampled", hf_tiny, root, True)
    if want("hf-0.5b"):
        check("hf-0.5b-greedy", hf_real, False)
        check("hf-0.5b-sampled", hf_real, True)
    for group in ("vllm", "sglang"):
        if not want(group):
            continue
        python = None if child else os.environ.get(f"CONSTRAIN_{group.upper()}_PYTHON")
        if not child:
            # The engines read these folders; transformers 5.25.0 (this
            # venv's) writes them.
            for name, fn in (("tiny", tiny_model_dir), ("0.5b", real_model_dir)):
                if name == "0.5b" and not (want("vllm-llm-0.5b") or want("sglang-engine-0.5b")):
                    continue
                try:
                    fn(root)
                except Exception as e:
                    print(f"note: the {name} model folder was not written: {type(e).__name__}: {e}", file=sys.stderr)
        if delegate(group, python, only):
            continue
        module = __import__(f"engines_{group}")
        module.run(check, Skip, need, root, tiny_model_dir, only)
    if child:
        return 0
    p, f, s = (RESULTS.count(x) for x in ("PASS", "FAIL", "SKIP"))
    print(f"{p} passed, {f} failed, {s} skipped")
    return 1 if f else 0


if __name__ == "__main__":
    sys.exit(main())
