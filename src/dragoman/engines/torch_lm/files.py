"""Model files for the PyTorch engines: packaged name, folder or GGUF -> a transformers folder.

The packaged model is a Q4_K_M GGUF. Dequantising it with transformers takes
about a minute, so the first load converts it once into a transformers folder
(bf16 safetensors plus the tokenizer) under `<cache_dir>/models/<name>-hf`, and
later loads read that folder in seconds. bf16 because on this CPU (AVX512-BF16)
its prefill measured about 4x the fp32 rate, with the same translations.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from dragoman.errors import ConfigError, ModelUnavailable
from dragoman.logs import get_logger

log = get_logger(__name__)

#: Written last into a converted folder; its presence means the conversion finished.
CONVERSION_STAMP = "dragoman-conversion.json"


def _is_hf_folder(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def model_id_for(model: str) -> str:
    """The model's id (what per-model files, such as alignment heads, are filed under):
    the packaged name, else the folder or file stem."""
    from dragoman import weights

    if model in weights.MODELS:
        return model
    path = Path(model).expanduser()
    return path.stem if path.suffix == ".gguf" else path.resolve().name


def prepare_model(model: str, cache_dir: Path) -> tuple[Path, str, str | None]:
    """The transformers folder to load for `model`, its id (`model_id_for`) and sha256.

    `model` is a packaged model name (resolved with `dragoman.weights.resolve`), a
    transformers folder, or a GGUF file; a GGUF is converted once into the cache.
    """
    from dragoman import weights

    spec = weights.MODELS.get(model)
    sha = spec.files[0].sha256 if spec is not None and len(spec.files) == 1 else None
    converted = Path(cache_dir).expanduser() / "models" / f"{model}-hf"
    if spec is not None and (converted / CONVERSION_STAMP).is_file():
        # Converted earlier: no need to re-verify the hundreds of MB of GGUF.
        return converted, model, sha
    path = weights.resolve(model, Path(cache_dir))
    model_id = model_id_for(model)
    if _is_hf_folder(path):
        return path, model_id, sha
    if path.is_file() and path.suffix == ".gguf":
        if spec is None:
            stat = path.stat()
            tag = hashlib.sha256(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:10]
            converted = Path(cache_dir).expanduser() / "models" / f"{model_id}-{tag}-hf"
        if not (converted / CONVERSION_STAMP).is_file():
            convert_gguf(path, converted)
        return converted, model_id, sha
    raise ConfigError(f"model {model!r}: {path} is neither a transformers folder nor a .gguf file")


def convert_gguf(gguf: Path, out_dir: Path, dtype: str = "bfloat16") -> Path:
    """Dequantise a GGUF into a transformers folder (safetensors + tokenizer), atomically.

    transformers' own `from_pretrained(gguf_file=...)` needs `accelerate`; its GGUF
    reader (`load_gguf_checkpoint`) does not, so the model is built from the GGUF's
    config and the dequantised tensors are loaded into it.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint as _load

    load_gguf_checkpoint: Any = _load
    auto_model: Any = AutoModelForCausalLM

    started = time.perf_counter()
    log.info("converting GGUF model for transformers (once)", gguf=gguf.name, out=str(out_dir))
    torch_dtype = getattr(torch, dtype)
    try:
        config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = auto_model.from_config(config, dtype=torch_dtype)
        tensors = load_gguf_checkpoint(
            str(gguf), return_tensors=True, model_to_load=model, torch_dtype=torch_dtype
        )["tensors"]
        result = model.load_state_dict(tensors, strict=False)
        # Buffers (rotary frequencies) are not in the file; any missing parameter is.
        missing = [k for k in result.missing_keys if k in dict(model.named_parameters())]
        if missing and not (missing == ["lm_head.weight"] and config.tie_word_embeddings):
            raise ValueError(f"weights missing from the GGUF: {missing[:5]}")
    except (OSError, ValueError, KeyError, RuntimeError, NotImplementedError) as exc:
        raise ModelUnavailable(f"cannot convert GGUF model {gguf.name}: {exc}") from exc
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        stamp = f'{{"source": "{gguf.name}", "size": {gguf.stat().st_size}, "dtype": "{dtype}"}}\n'
        (tmp / CONVERSION_STAMP).write_text(stamp, encoding="utf-8")
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache may be shared
        if out_dir.exists() and not (out_dir / CONVERSION_STAMP).is_file():
            shutil.rmtree(out_dir)  # a conversion that died half-way
        try:
            os.replace(tmp, out_dir)
        except OSError:
            # Another process finished the same conversion first: use its copy.
            if not (out_dir / CONVERSION_STAMP).is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("GGUF model converted", seconds=round(time.perf_counter() - started, 1), out=str(out_dir))
    return out_dir
