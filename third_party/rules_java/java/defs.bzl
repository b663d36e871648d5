"""Forwards rules_java's public rules to Bazel 4.2.3's native ones (offline build)."""

def java_binary(**kw):
    native.java_binary(**kw)

def java_import(**kw):
    native.java_import(**kw)

def java_library(**kw):
    native.java_library(**kw)

def java_runtime(**kw):
    native.java_runtime(**kw)

def java_toolchain(**kw):
    native.java_toolchain(**kw)

def java_test(**kw):
    native.java_test(**kw)
