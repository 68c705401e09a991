"""PyTorch is an optional extra: the default engines never import it, and what needs it says how
to install it. Each check runs in a fresh interpreter in which `import torch` fails, as where
the extra is not installed."""

from __future__ import annotations

import subprocess
import sys

#: The modules of the default services and engines (`dragoman serve` with no flags).
DEFAULT_PATH = [
    "dragoman.cli",
    "dragoman.transports.app",
    "dragoman.engines.asr.whisper_ct2",
    "dragoman.engines.mt.qwen_llama",
    "dragoman.engines.llm.llama_cpp",
    "dragoman.engines.tts.hibari",
    "dragoman.engines.tts.kokoro",
    "dragoman.engines.turn.smart_turn",
    "dragoman.sessions.file_transcription",
]

_NO_TORCH = "import sys; sys.modules['torch'] = None\n"


def run_without_torch(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _NO_TORCH + code], capture_output=True, text=True, timeout=300, check=False
    )


def test_the_default_path_imports_without_torch() -> None:
    code = f"import importlib\nfor name in {DEFAULT_PATH!r}:\n    importlib.import_module(name)\n"
    code += "print(sorted(n for n in sys.modules if n == 'torch' or n.startswith('torch.')))\n"
    done = run_without_torch(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['torch']", "only the blocked entry itself"


def test_the_torch_backend_names_the_extra_it_needs() -> None:
    code = (
        "from pathlib import Path\n"
        "from dragoman.config import MTSettings\n"
        "from dragoman.engines.registry import create_mt_engine\n"
        "from dragoman.errors import ConfigError\n"
        "try:\n"
        "    create_mt_engine(MTSettings(backend='qwen-torch'), Path('.'))\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    done = run_without_torch(code)
    assert done.returncode == 0, done.stderr
    assert "pip install 'dragoman[torch]'" in done.stdout, done.stdout
