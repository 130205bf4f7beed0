"""Kiln's Python client: compile ONNX models on a kiln-server and infer with NumPy.

    import numpy as np, kiln
    c = kiln.Client("localhost:8001")
    c.compile("model.onnx", "mlp", opt_level=3)
    y = c.infer("mlp", {"x": np.ones((4, 16), np.float32)})["y"]
"""

from .client import UPLOAD_ABOVE_BYTES, Client, KilnError, Tls
from .tensors import BF16, DATATYPES

__all__ = ["BF16", "Client", "DATATYPES", "KilnError", "Tls", "UPLOAD_ABOVE_BYTES"]
