"""Generates C++ (and optionally gRPC) code from .proto files with Debian's protoc.

Bazel 4's native proto rules want to build protoc from source; Kiln uses the system
protoc and grpc_cpp_plugin instead, so generation is a plain genrule.
"""

def kiln_proto_library(name, srcs, deps = [], grpc = False, visibility = None):
    """cc_library `name` holding the generated messages (and stubs when grpc=True)."""
    hdrs = []
    cc_srcs = []
    for src in srcs:
        base = src[:-len(".proto")]
        hdrs.append(base + ".pb.h")
        cc_srcs.append(base + ".pb.cc")
        if grpc:
            hdrs.append(base + ".grpc.pb.h")
            cc_srcs.append(base + ".grpc.pb.cc")

    grpc_flags = ""
    if grpc:
        grpc_flags = "--grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin "

    native.genrule(
        name = name + "_gen",
        srcs = srcs + [d + "_srcs" for d in deps],
        outs = hdrs + cc_srcs,
        cmd = "/usr/bin/protoc -I. --cpp_out=$(GENDIR) " + grpc_flags +
              " ".join(["$(location %s)" % s for s in srcs]),
    )

    native.filegroup(
        name = name + "_srcs",
        srcs = srcs + [d + "_srcs" for d in deps],
        visibility = visibility,
    )

    native.cc_library(
        name = name,
        srcs = cc_srcs,
        hdrs = hdrs,
        deps = deps + ["//third_party:protobuf"] + (["//third_party:grpc"] if grpc else []),
        visibility = visibility,
    )
