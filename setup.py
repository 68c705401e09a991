"""The one compiled part of dragoman; pyproject.toml declares the rest of the build.

The attention tap's eval callback answers llama.cpp's question about every graph node in
C (src/dragoman/engines/node_filter.c, used by `engines.llama_native.NodeFilter`). The C
compiler that builds llama.cpp's wheel (`make install`) builds it too.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("dragoman.engines._node_filter", ["src/dragoman/engines/node_filter.c"])])
