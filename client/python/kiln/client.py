"""Client: Kiln's gRPC services (KServe v2 inference and kiln.v1.Compiler) from Python.

Every call that fails raises KilnError carrying the gRPC status code's name
("NOT_FOUND", "INVALID_ARGUMENT", ...) and the server's message, so a caller
handles one exception type. Results are the kiln.v1 response messages
(kiln._proto.kiln_service_pb2), except infer and call_kernel, which return
NumPy arrays.
"""

import hashlib
import os

import grpc

from . import tensors
from ._proto import graph_pb2
from ._proto import grpc_service_pb2
from ._proto import grpc_service_pb2_grpc
from ._proto import kiln_service_pb2
from ._proto import kiln_service_pb2_grpc
from google.protobuf import text_format

# As Kiln's C++ client: models carry their weights, so messages may be large
# (the server's own limit is --max-message-mb, 256 by default).
_MAX_MESSAGE_BYTES = 256 << 20
# A compile request above this goes up in chunks through UploadModel.
UPLOAD_ABOVE_BYTES = 64 << 20
# Each chunk stays under the smallest message limit a server may set
# (--max-message-mb=1), framing included.
_CHUNK_BYTES = 512 << 10


class KilnError(Exception):
    """A failed call: `code` is the gRPC status code's name, `message` the server's words."""

    def __init__(self, code, message):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message


class Tls:
    """TLS settings: `ca` verifies the server (default: system roots); `cert` and `key`
    (PEM file paths) are the client's own for mutual TLS."""

    def __init__(self, ca=None, cert=None, key=None):
        if (cert is None) != (key is None):
            raise KilnError("INVALID_ARGUMENT", "Tls: cert and key go together")
        self.ca, self.cert, self.key = ca, cert, key


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _raise_from(error):
    code = error.code()
    raise KilnError(code.name if code is not None else "UNKNOWN", error.details() or "") from None


def _compile_options(options):
    """kiln.v1.CompileOptions from keyword arguments named as its fields."""
    o = kiln_service_pb2.CompileOptions()
    for key, value in options.items():
        if key == "opt_level":
            o.opt_level = int(value)
        elif key in ("disabled_passes", "required_passes", "print_ir_after"):
            getattr(o, key).extend([value] if isinstance(value, str) else value)
        elif key == "max_fuse_depth":
            o.max_fuse_depth = int(value)
        elif key == "input_shapes":  # {"x": [1, 3, 224, 224]}
            for name, dims in value.items():
                o.input_shapes[name].values.extend(int(d) for d in dims)
        elif key == "dynamic_batching":  # {"max_batch_size": 8, "preferred_batch_size": [4, 8]}
            for field, v in value.items():
                if field == "preferred_batch_size":
                    o.dynamic_batching.preferred_batch_size.extend(int(x) for x in v)
                elif field in ("max_batch_size", "max_queue_delay_microseconds"):
                    setattr(o.dynamic_batching, field, int(v))
                else:
                    raise KilnError("INVALID_ARGUMENT", "dynamic_batching has no field %r" % field)
        elif key == "symbol_ranges":  # {"batch": (1, 16)}
            for symbol, (lo, hi) in value.items():
                o.symbol_ranges[symbol].min = int(lo)
                o.symbol_ranges[symbol].max = int(hi)
        elif key == "eager_shapes":  # [{"batch": 1}, {"batch": 8}]
            for sizes in value:
                entry = o.eager_shapes.add()
                for symbol, size in sizes.items():
                    entry.sizes[symbol] = int(size)
        elif key in ("exact_shapes_only", "kernel_bounds_checks"):
            setattr(o, key, bool(value))
        elif key == "nchwc_layout":  # "auto", "off" or "on"
            if value not in ("auto", "off", "on"):
                raise KilnError("INVALID_ARGUMENT", "nchwc_layout wants 'auto', 'off' or 'on'")
            o.nchwc_layout = {"auto": 0, "off": 1, "on": 2}[value]
        else:
            raise KilnError("INVALID_ARGUMENT", "CompileOptions has no field %r" % key)
    return o


def _tensor_value(value):
    datatype, shape, raw = tensors.to_wire(value)
    return kiln_service_pb2.TensorValue(datatype=datatype, shape=shape, raw=raw)


class Client:
    """A connection to one kiln-server, e.g. Client("localhost:8001").

    token: sent as "authorization: Bearer TOKEN" (the server's --auth-tokens).
    tls: False (plaintext), True (TLS, system roots) or a Tls(...).
    timeout: seconds each call may take (None: no deadline).
    """

    def __init__(self, addr, token=None, tls=False, timeout=None):
        options = [
            ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
        ]
        if tls:
            t = tls if isinstance(tls, Tls) else Tls()
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(t.ca) if t.ca else None,
                private_key=_read(t.key) if t.key else None,
                certificate_chain=_read(t.cert) if t.cert else None,
            )
            self._channel = grpc.secure_channel(addr, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(addr, options=options)
        self._inference = grpc_service_pb2_grpc.GRPCInferenceServiceStub(self._channel)
        self._compiler = kiln_service_pb2_grpc.CompilerStub(self._channel)
        self._metadata = (("authorization", "Bearer " + token),) if token else None
        self._timeout = timeout

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            _raise_from(e)

    # --- Compiling -----------------------------------------------------------------

    def _compile_request(self, model, name, replace, version, options):
        request = kiln_service_pb2.CompileModelRequest(
            model_name=name or "", replace=replace, version=version,
            options=_compile_options(options))
        if isinstance(model, graph_pb2.Graph):
            request.graph.CopyFrom(model)
        elif isinstance(model, (bytes, bytearray, memoryview)):
            request.onnx_model = bytes(model)  # bytes are an ONNX ModelProto
        else:
            path = os.fspath(model)
            data = _read(path)
            if path.endswith(".onnx"):
                request.onnx_model = data
            elif path.endswith(".pbtxt"):
                try:
                    text_format.Parse(data.decode("utf-8"), request.graph)
                except text_format.ParseError as e:
                    raise KilnError("INVALID_ARGUMENT", "%s: %s" % (path, e)) from None
            else:
                request.graph.ParseFromString(data)  # a binary kiln.v1.Graph
        return request

    def compile(self, model, name=None, *, replace=False, version=0, upload=None, **options):
        """Compiles and loads `model` as `name`; returns the CompileModelResponse.

        model: a path (.onnx, .pbtxt kiln.v1.Graph text, else binary Graph), ONNX bytes,
        or a graph_pb2.Graph. options: CompileOptions' fields (opt_level=3,
        input_shapes={"x": [1, 16]}, dynamic_batching={...}, ...). A request over
        UPLOAD_ABOVE_BYTES (or upload=True) goes through the chunked UploadModel.
        """
        request = self._compile_request(model, name, replace, version, options)
        if upload is None:
            upload = request.ByteSize() > UPLOAD_ABOVE_BYTES
        if upload:
            return self._upload(request)
        return self._call(self._compiler.CompileModel, request)

    def compile_stream(self, model, name=None, *, replace=False, version=0, **options):
        """The same compile, yielding CompileProgress messages as passes and kernels finish;
        the last has kind FINISHED and carries the CompileModelResponse."""
        request = self._compile_request(model, name, replace, version, options)
        stream = self._compiler.CompileModelStream(
            request, timeout=self._timeout, metadata=self._metadata)
        try:
            for progress in stream:
                yield progress
        except grpc.RpcError as e:
            _raise_from(e)
        finally:
            stream.cancel()  # a caller that stops reading early ends the call now

    def _upload(self, request):
        header = kiln_service_pb2.UploadHeader()
        if request.WhichOneof("model") == "graph":
            header.graph = True
            data = request.graph.SerializeToString()
        else:
            data = request.onnx_model
        request.ClearField("model")
        header.request.CopyFrom(request)
        header.total_bytes = len(data)
        header.sha256 = hashlib.sha256(data).hexdigest()

        def chunks():
            yield kiln_service_pb2.ModelChunk(header=header)
            view = memoryview(data)
            for at in range(0, len(data), _CHUNK_BYTES):
                yield kiln_service_pb2.ModelChunk(data=bytes(view[at:at + _CHUNK_BYTES]))

        return self._call(self._compiler.UploadModel, chunks())

    # --- Inference (KServe v2) -----------------------------------------------------

    def infer(self, name, inputs, outputs=None, version=""):
        """Runs model `name` on {input name: ndarray (or BF16(...))}; returns
        {output name: ndarray}. outputs: names to return (default: all)."""
        request = grpc_service_pb2.ModelInferRequest(model_name=name, model_version=str(version))
        for input_name, value in inputs.items():
            datatype, shape, raw = tensors.to_wire(value)
            request.inputs.add(name=input_name, datatype=datatype, shape=shape)
            request.raw_input_contents.append(raw)
        for output_name in outputs or ():
            request.outputs.add(name=output_name)
        response = self._call(self._inference.ModelInfer, request)
        result = {}
        for i, out in enumerate(response.outputs):
            if i < len(response.raw_output_contents):
                result[out.name] = tensors.from_wire(
                    out.datatype, out.shape, response.raw_output_contents[i])
            else:
                result[out.name] = tensors.from_contents(out.datatype, out.shape, out.contents)
        return result

    def ready(self, name=None, version=""):
        """Whether the server (or model `name`, at `version`; "": its highest) is ready."""
        if name is None:
            return self._call(self._inference.ServerReady,
                              grpc_service_pb2.ServerReadyRequest()).ready
        return self._call(self._inference.ModelReady,
                          grpc_service_pb2.ModelReadyRequest(name=name, version=str(version))).ready

    def model_metadata(self, name, version=""):
        """KServe's ModelMetadata; its `versions` lists every version served."""
        return self._call(self._inference.ModelMetadata,
                          grpc_service_pb2.ModelMetadataRequest(name=name, version=str(version)))

    # --- Models, caches, statistics ------------------------------------------------

    def models(self):
        """The loaded models: a list of kiln.v1.ModelSummary."""
        return list(self._call(self._compiler.ListModels,
                               kiln_service_pb2.ListModelsRequest()).models)

    def unload(self, name):
        self._call(self._compiler.UnloadModel, kiln_service_pb2.UnloadModelRequest(model_name=name))

    def cache_stats(self):
        return self._call(self._compiler.GetCacheStats, kiln_service_pb2.GetCacheStatsRequest())

    def timing_stats(self, name):
        """The kiln.v1.ModelTiming of model `name`."""
        response = self._call(self._compiler.GetTimingStats,
                              kiln_service_pb2.GetTimingStatsRequest(model_name=name))
        for timing in response.models:
            if timing.model_name == name:
                return timing
        raise KilnError("NOT_FOUND", "no timing statistics for model '%s'" % name)

    def server_info(self):
        return self._call(self._compiler.GetServerInfo, kiln_service_pb2.GetServerInfoRequest())

    # --- Kernels -------------------------------------------------------------------

    def kernels(self):
        """The kernel cache's kernels: a list of kiln.v1.KernelSummary (args: inputs'
        then the output's datatype and shape)."""
        return list(self._call(self._compiler.ListKernels,
                               kiln_service_pb2.ListKernelsRequest()).kernels)

    def call_kernel(self, key, *inputs):
        """Runs one cached kernel (key or a unique prefix) on `inputs`; returns its output."""
        request = kiln_service_pb2.CallKernelRequest(
            key=key, inputs=[_tensor_value(v) for v in inputs])
        out = self._call(self._compiler.CallKernel, request).output
        return tensors.from_wire(out.datatype, out.shape, out.raw)

    def benchmark_kernel(self, key, *inputs, number=0, repeat=0, min_repeat_ms=0.0, warmup=0):
        """TVM's time_evaluator on one kernel (zeros when no inputs); returns the
        BenchmarkKernelResponse (seconds per run)."""
        request = kiln_service_pb2.BenchmarkKernelRequest(
            key=key, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms, warmup=warmup,
            inputs=[_tensor_value(v) for v in inputs])
        return self._call(self._compiler.BenchmarkKernel, request)
