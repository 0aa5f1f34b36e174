"""CRC-32C (Castagnoli), the checksum of v2 record batches, from the crc32c package's C extension.

The package's `__init__` reads its own version through importlib.metadata, which imports email,
zipfile, csv and more: about as much start-up as the rest of the protocol layer. Only the extension
module is called, so it is loaded directly, under its own name (a later `import crc32c` reuses it).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Callable

_EXTENSION = "crc32c._crc32c"


def _extension() -> ModuleType:
    loaded = sys.modules.get(_EXTENSION)
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("crc32c")  # finds the package without running its __init__
    spec = None
    for folder in (package.submodule_search_locations or []) if package is not None else []:
        finder = importlib.machinery.FileFinder(
            folder, (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES))
        spec = finder.find_spec(_EXTENSION)
        if spec is not None:
            break
    if spec is None or spec.loader is None:
        return importlib.import_module(_EXTENSION)  # an unusual installation: the ordinary, slower way
    module = importlib.util.module_from_spec(spec)
    sys.modules[_EXTENSION] = module
    spec.loader.exec_module(module)
    return module


crc32c: Callable[..., int] = _extension().crc32c
