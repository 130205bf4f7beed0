"""NumPy arrays to and from KServe v2 tensors (datatype, shape, raw bytes).

Raw contents are row-major and little-endian whatever the host, as Kiln's
server reads them. NumPy has every KServe datatype Kiln serves but BF16:
a float32 array wrapped in BF16(...) goes out as bfloat16 (rounded to
nearest even, NaN kept quiet, as Kiln's C++ client and compiler round), and
a BF16 tensor comes back widened to float32, which holds every bfloat16
exactly (as `kiln infer` writes it to .npy).
"""

import numpy as np

# KServe's datatype names for the NumPy dtypes Kiln serves (server/kserve_datatype.cc).
_BY_DTYPE = {
    np.dtype(np.bool_): "BOOL",
    np.dtype(np.uint8): "UINT8",
    np.dtype(np.uint16): "UINT16",
    np.dtype(np.uint32): "UINT32",
    np.dtype(np.uint64): "UINT64",
    np.dtype(np.int8): "INT8",
    np.dtype(np.int16): "INT16",
    np.dtype(np.int32): "INT32",
    np.dtype(np.int64): "INT64",
    np.dtype(np.float16): "FP16",
    np.dtype(np.float32): "FP32",
    np.dtype(np.float64): "FP64",
}
_BY_NAME = {name: dtype for dtype, name in _BY_DTYPE.items()}

DATATYPES = tuple(_BY_NAME) + ("BF16",)


class BF16:
    """Marks a float array to be sent as BF16: `client.infer(m, {"x": BF16(a)})`."""

    def __init__(self, array):
        self.array = np.asarray(array, dtype=np.float32)


def float32_to_bf16_bits(array):
    """float32 -> uint16 bfloat16 patterns, rounded to nearest even."""
    u = np.ascontiguousarray(array, dtype="<f4").view("<u4")
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).astype("<u2")
    quiet = ((u >> 16) | 0x40).astype("<u2")
    return np.where(nan, quiet, rounded).astype("<u2")


def bf16_bits_to_float32(bits):
    """uint16 bfloat16 patterns -> float32 (exact)."""
    return (np.asarray(bits, dtype="<u2").astype("<u4") << 16).view("<f4")


def to_wire(value):
    """(datatype, shape, raw bytes) of an ndarray (or BF16, or anything np.asarray takes)."""
    if isinstance(value, BF16):
        return "BF16", list(value.array.shape), float32_to_bf16_bits(value.array).tobytes()
    array = np.asarray(value)
    name = _BY_DTYPE.get(array.dtype.newbyteorder("="))
    if name is None:
        raise TypeError(
            "dtype %s has no KServe datatype Kiln serves (%s)" % (array.dtype, ", ".join(DATATYPES))
        )
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return name, list(array.shape), little.tobytes()


def from_wire(datatype, shape, raw):
    """The ndarray of a KServe tensor given as raw bytes; BF16 widens to float32."""
    shape = tuple(int(d) for d in shape)
    if datatype == "BF16":
        return bf16_bits_to_float32(np.frombuffer(raw, dtype="<u2")).reshape(shape).copy()
    dtype = _BY_NAME.get(datatype)
    if dtype is None:
        raise TypeError("datatype %r is not one Kiln serves" % datatype)
    # A copy in native order: frombuffer's view of `raw` is read-only.
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).reshape(shape).astype(dtype)


# InferTensorContents' field for each datatype, for a tensor sent typed
# rather than raw (KServe allows either; Kiln answers raw).
_CONTENTS_FIELD = {
    "BOOL": "bool_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
}


def from_contents(datatype, shape, contents):
    """The ndarray of a tensor given as typed InferTensorContents."""
    field = _CONTENTS_FIELD.get(datatype)
    if field is None:
        raise TypeError("datatype %r has no typed contents field" % datatype)
    values = getattr(contents, field)
    return np.array(values, dtype=_BY_NAME[datatype]).reshape(tuple(int(d) for d in shape))
