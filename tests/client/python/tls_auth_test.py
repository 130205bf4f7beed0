"""The Python client's TLS and bearer tokens against a real kiln-server.

$KILN_TLS_SERVER serves TLS with --auth-tokens; $KILN_MTLS_SERVER also wants a
client certificate (--tls-client-ca). $CERTS holds make_certs.sh's files.
"""

import os
import unittest

import numpy as np
from onnx import TensorProto, helper

import kiln

CERTS = os.environ["CERTS"]
INFER, ADMIN = "infer-token-0123456789", "admin-token-0123456789"
TLS = kiln.Tls(ca=os.path.join(CERTS, "ca.pem"))


def _relu():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


class TlsAuthTest(unittest.TestCase):
    def code_of(self, call):
        with self.assertRaises(kiln.KilnError) as caught:
            call()
        return caught.exception.code

    def test_tokens_and_scopes(self):
        addr = os.environ["KILN_TLS_SERVER"]
        self.assertEqual(self.code_of(lambda: kiln.Client(addr, tls=TLS, timeout=30).models()),
                         "UNAUTHENTICATED")
        infer = kiln.Client(addr, token=INFER, tls=TLS, timeout=30)
        self.assertEqual(self.code_of(lambda: infer.compile(_relu(), "relu")), "PERMISSION_DENIED")
        admin = kiln.Client(addr, token=ADMIN, tls=TLS, timeout=30)
        admin.compile(_relu(), "relu")
        x = np.array([[-1, 0, 2], [3, -4, 5]], np.float32)
        np.testing.assert_array_equal(infer.infer("relu", {"x": x})["y"], np.maximum(x, 0))

    def test_plaintext_to_a_tls_server_is_unavailable(self):
        client = kiln.Client(os.environ["KILN_TLS_SERVER"], token=ADMIN, timeout=10)
        self.assertEqual(self.code_of(client.models), "UNAVAILABLE")

    def test_mutual_tls(self):
        addr = os.environ["KILN_MTLS_SERVER"]
        mutual = kiln.Tls(ca=os.path.join(CERTS, "ca.pem"), cert=os.path.join(CERTS, "client.pem"),
                          key=os.path.join(CERTS, "client.key"))
        self.assertEqual(kiln.Client(addr, tls=mutual, timeout=30).models(), [])
        self.assertEqual(self.code_of(kiln.Client(addr, tls=TLS, timeout=10).models), "UNAVAILABLE")

    def test_cert_without_key_is_invalid_argument(self):
        self.assertEqual(self.code_of(lambda: kiln.Tls(cert="client.pem")), "INVALID_ARGUMENT")


if __name__ == "__main__":
    unittest.main(verbosity=2)
