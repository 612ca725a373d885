"""The course's own tiny code model, trained on CPU in lesson 04 and reused by lessons 05-08.

``get_tiny_model("base")`` returns a standard Hugging Face folder (config.json, model.safetensors,
tokenizer.json, tokenizer_config.json, special_tokens_map.json, generation_config.json) that
``AutoModelForCausalLM`` / ``AutoTokenizer`` load like any hub model and that LLaMA-Factory trains with
``template: qwen``. It is built on first call (same code, same seed) and cached after, keyed by the
config that made it:

1. a code corpus: lessons 01-03's corpus (``pretraining_data.corpus_repositories``: the repositories' files
   in dependency order), cut into snippets, held-out repositories kept apart for evaluation;
2. a byte-level BPE tokenizer (``tokenizers``, 4,096 tokens, Qwen2's pre-tokenizer regex) with
   ``<|endoftext|>``, ChatML markers and both styles of FIM sentinels as special tokens;
3. a Qwen2-architecture decoder of ~2.4M parameters pretrained for a fixed number of steps with
   context-level FIM (``course_lib.training.fim``) at ``fim_rate`` 0.5 ("base") or without FIM ("nofim", the
   lesson's control run).

Introduced in lesson 04.

The modules: :mod:`~course_lib.training.tinymodel.pretraining_data` (1), :mod:`~course_lib.training.tinymodel.tokenizer`
(2), :mod:`~course_lib.training.tinymodel.model` (3, and the cached build), and
:mod:`~course_lib.training.tinymodel.experiments` (what the model measures). Their public names are all here.
"""
from course_lib.training.tinymodel.experiments import (
    dependency_order_experiment,
    later_files_loss,
    order_experiment,
    repeat_copy_loss,
    repo_token_stream,
)
from course_lib.training.tinymodel.model import (
    BUILD_VERSION,
    MODEL_NAMES,
    build_tiny_model,
    course_tokenizer,
    encode_documents,
    fim_eval_examples,
    get_tiny_model,
    main,
    pack_windows,
    pretrain,
    seeded,
    tiny_config,
    tiny_model_dir,
    with_seed,
)
from course_lib.training.tinymodel.pretraining_data import (
    PretrainingCorpus,
    RepoFiles,
    corpus_repositories,
    head_of,
    is_held_out,
    pretraining_corpus,
    split_into_snippets,
    strip_docstrings_and_comments,
)
from course_lib.training.tinymodel.tokenizer import (
    CHAT_TEMPLATE,
    EOT,
    IM_END,
    IM_START,
    QWEN2_SPLIT,
    QWEN_FIM,
    SPECIAL_TOKENS,
    STARCODER_FIM,
    to_transformers_tokenizer,
    train_tokenizer,
)

__all__ = [
    "BUILD_VERSION", "CHAT_TEMPLATE", "EOT", "IM_END", "IM_START", "MODEL_NAMES", "PretrainingCorpus",
    "QWEN2_SPLIT", "QWEN_FIM", "RepoFiles", "SPECIAL_TOKENS", "STARCODER_FIM", "build_tiny_model",
    "corpus_repositories", "course_tokenizer", "dependency_order_experiment", "encode_documents",
    "fim_eval_examples", "get_tiny_model", "head_of", "is_held_out", "later_files_loss", "main",
    "order_experiment", "pack_windows", "pretrain", "pretraining_corpus", "repeat_copy_loss",
    "repo_token_stream", "seeded", "split_into_snippets", "strip_docstrings_and_comments", "tiny_config",
    "tiny_model_dir", "to_transformers_tokenizer", "train_tokenizer", "with_seed",
]
