"""cc_gtest: the shape of most psync tests, a GoogleTest binary of one source file."""

load("@rules_cc//cc:defs.bzl", "cc_test")

def cc_gtest(name, deps = [], srcs = None, **kwargs):
    """A cc_test of `srcs` (default: [name + ".cc"]) linked with GoogleTest's main.

    Args:
      name: the test's name.
      deps: what the test uses besides GoogleTest (@system//:gtest_main is added).
      srcs: the test's sources, when not just <name>.cc.
      **kwargs: any other cc_test attribute (size, data, copts, tags, ...).
    """
    cc_test(
        name = name,
        srcs = srcs if srcs != None else [name + ".cc"],
        deps = deps + ["@system//:gtest_main"],
        **kwargs
    )
