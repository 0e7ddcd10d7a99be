"""libsonopipe-client through ctypes, declared from its header as MATLAB's loadlibrary declares it:
every `SP_API` prototype of sonopipe_client.h becomes a function with those argument and return
types, so the tests call exactly what a C, MATLAB or LabVIEW caller calls. The library is the one
CTest names in SONOPIPE_CLIENT_LIBRARY; the header is the source tree's."""
import ctypes
import os
import re
import unittest

import support

HEADER = os.path.join(os.environ.get("SONOPIPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                      "client", "sonopipe_client.h")

# C type (spaces normalised, parameter name removed) -> ctypes type.
_TYPES = {
    "void": None, "int": ctypes.c_int, "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64,
    "int64_t": ctypes.c_int64, "size_t": ctypes.c_size_t, "double": ctypes.c_double,
    "const char*": ctypes.c_char_p, "char*": ctypes.c_char_p, "const void*": ctypes.c_void_p,
    "const double*": ctypes.POINTER(ctypes.c_double), "uint64_t*": ctypes.POINTER(ctypes.c_uint64),
    "uint32_t*": ctypes.POINTER(ctypes.c_uint32), "size_t*": ctypes.POINTER(ctypes.c_size_t),
    "void**": ctypes.POINTER(ctypes.c_void_p),
    "const void**": ctypes.POINTER(ctypes.c_void_p),
}
_HANDLES = ("sp_sender", "sp_frame", "sp_subscriber", "sp_result", "sp_shm_producer", "sp_shm_consumer")


def c_type(declaration):
    declaration = re.sub(r"\s*\*", "*", declaration.strip())
    handle = declaration.replace("const ", "").rstrip("*")
    if handle in _HANDLES:
        return ctypes.POINTER(ctypes.c_void_p) if declaration.endswith("**") else ctypes.c_void_p
    return _TYPES[declaration]


def prototypes(header_text):
    """[(name, return declaration, [parameter declarations])] of every SP_API function, in order."""
    text = re.sub(r"/\*.*?\*/", " ", header_text, flags=re.S)
    found = []
    for match in re.finditer(r"SP_API\s+([\w\s\*]+?)\s*\b(sp_\w+)\s*\(([^)]*)\)\s*;", text):
        returns, name, parameters = match.groups()
        parameters = [] if parameters.strip() in ("", "void") else [p.strip() for p in parameters.split(",")]
        # Drop each parameter's name: the last identifier.
        found.append((name, returns.strip(), [re.sub(r"\b\w+$", "", p).strip() for p in parameters]))
    return found


def constants(header_text):
    """The header's #define SP_* integer constants, e.g. SP_ERROR_TIMEOUT -> -4."""
    return {name: int(value) for name, value in
            re.findall(r"#define\s+(SP_\w+)\s+\(?(-?\d+)\)?", header_text)}


def load():
    """The library with every header prototype declared, and the header's constants as attributes."""
    path = support.tool("client-library")
    library = ctypes.CDLL(path)
    with open(HEADER) as f:
        header_text = f.read()
    declared = prototypes(header_text)
    if len(declared) < 40:
        raise AssertionError(f"only {len(declared)} prototypes read from {HEADER}")
    for name, returns, parameters in declared:
        function = getattr(library, name)
        function.restype = c_type(returns)
        function.argtypes = [c_type(p) for p in parameters]
    library.prototypes = {name: (returns, parameters) for name, returns, parameters in declared}
    for name, value in constants(header_text).items():
        setattr(library, name, value)
    return library


class ClientLibraryTest(unittest.TestCase):
    """Loads the library once per test class (self.lib)."""

    @classmethod
    def setUpClass(cls):
        cls.lib = load()

    def last_error(self):
        return self.lib.sp_last_error().decode()

    def ok(self, status):
        self.assertEqual(status, self.lib.SP_OK, self.last_error())
