"""Forwards rules_proto's public rules to Bazel 4.2.3's native ones (offline build)."""

def proto_library(**kw):
    native.proto_library(**kw)

def proto_lang_toolchain(**kw):
    native.proto_lang_toolchain(**kw)
