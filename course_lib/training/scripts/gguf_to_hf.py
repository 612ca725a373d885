"""Convert one GGUF file into a plain Hugging Face folder: ``python -P gguf_to_hf.py MODEL.gguf OUT_DIR``.

Run by :func:`course_lib.training.pretrained.convert_gguf` with the TRL environment's interpreter
(transformers 5 and the ``gguf`` package; the course venv has neither the ``gguf`` package nor may it
gain one: its installed distributions are lesson 01's corpus). It imports only torch, transformers and
the standard library.

Steps: load tokenizer and model with ``gguf_file=`` (transformers dequantizes every tensor to float32);
``save_pretrained`` refuses a model "quantized with gguf", so the state dict is copied into a model built
with ``from_config`` (every key must match) and that one is saved. The saved files are then made readable
by both transformers 4.57 (the course venv) and vLLM: ``quantization_config`` removed from config.json (vLLM
rejects "Unknown quantization method: gguf"), ``rope_theta`` also written at the top level (4.57 does not
read transformers 5's ``rope_parameters`` and would silently fall back to 10,000), the tokenizer class named
``PreTrainedTokenizerFast`` (4.57 does not know ``TokenizersBackend``) with inputs ``input_ids`` and
``attention_mask`` only. Prints one JSON line with what it did, including a check: the GGUF model's
logits on :data:`CHECK_TEXT` (argmax per position and a few raw values), which the converted folder must
reproduce wherever it is loaded (tests/test_pretrained.py loads it with the course venv's transformers).
"""
import json
import sys
import time
from pathlib import Path

CHECK_TEXT = "def fibonacci(n):\n    if n < 2:\n        return n\n"


def logits_check(model, tok) -> dict:
    """Greedy next-token ids at every position of CHECK_TEXT and the first logits of the last position."""
    import torch

    ids = tok(CHECK_TEXT, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    return {"text": CHECK_TEXT, "argmax": logits.argmax(-1).tolist(), "last_logits": logits[-1, :8].tolist()}


def main(gguf_path: str, out_dir: str, name: str) -> int:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.monotonic()
    src, out = Path(gguf_path), Path(out_dir)
    tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    quantized = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name, dtype=torch.float32)
    t_load = time.monotonic() - t0
    check = logits_check(quantized.eval(), tok)
    plain = AutoModelForCausalLM.from_config(quantized.config, dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict(), strict=True)     # raises when a key is missing or extra
    plain.generation_config = quantized.generation_config
    parameters = sum(p.numel() for p in plain.parameters())
    plain.save_pretrained(str(out))
    tok.save_pretrained(str(out))

    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    dropped = cfg.pop("quantization_config", None)
    rope = cfg.get("rope_parameters") or {}
    if "rope_theta" in rope and "rope_theta" not in cfg:
        cfg["rope_theta"] = rope["rope_theta"]
    cfg["_model_name_or_path"] = name
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    tok_path = out / "tokenizer_config.json"
    tcfg = json.loads(tok_path.read_text(encoding="utf-8"))
    tcfg.pop("backend", None)
    tcfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    tcfg["model_input_names"] = ["input_ids", "attention_mask"]
    tok_path.write_text(json.dumps(tcfg, indent=2) + "\n", encoding="utf-8")

    print(json.dumps({"architecture": type(plain).__name__, "parameters": parameters,
                      "tied_embeddings": bool(cfg.get("tie_word_embeddings")),
                      "dropped_quantization_config": dropped, "rope_theta": cfg.get("rope_theta"),
                      "transformers": transformers.__version__, "torch": torch.__version__,
                      "load_seconds": round(t_load, 1), "seconds": round(time.monotonic() - t0, 1),
                      "check": check}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else Path(sys.argv[1]).stem))
