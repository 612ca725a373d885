"""Lessons 04–05, training: fill-in-the-middle (``fim``), the course's tiny code model
(``tinymodel``), instruction data (``instructions``), the LazyLLM codegen pipeline and its teacher
(``codegen``, ``teacher``), supervised fine-tuning through LazyLLM → LLaMA-Factory (``sft``)."""
