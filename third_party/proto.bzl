"""cc_grpc_proto: C++ Protobuf + gRPC code generation with Debian's protoc and grpc_cpp_plugin."""

def cc_grpc_proto(name, src, deps = [], visibility = None):
    """Generates <src>.pb.{h,cc} and <src>.grpc.pb.{h,cc} and wraps them in cc_library `name`.

    `src` is a .proto file in this package; its import path is the workspace-relative path.
    """
    base = src[:-len(".proto")]
    pkg = native.package_name()
    outs = [base + ext for ext in [".pb.h", ".pb.cc", ".grpc.pb.h", ".grpc.pb.cc"]]
    native.genrule(
        name = name + "_gen",
        srcs = [src],
        outs = outs,
        cmd = " ".join([
            "protoc",
            "--proto_path=.",
            "--cpp_out=$(GENDIR)",
            "--grpc_out=$(GENDIR)",
            "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin)",
            "$(location " + src + ")",
        ]),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["@system//:grpc++"],
        visibility = visibility,
    )
