"""The shapes of most psync cc targets.

cc_gtest: a GoogleTest binary of one source file.
cc_lib: a library of one concern, <name>.cc and <name>.h.
cc_lib_with_test: that library and its test, <name>_test.cc (one test per library).
cc_test_lib: a testonly library (fixtures, harnesses, fakes) of <name>.cc and <name>.h.
"""

load("@rules_cc//cc:defs.bzl", "cc_library", "cc_test")

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

def cc_lib(name, deps = [], srcs = None, hdrs = None, **kwargs):
    """A cc_library of `srcs` (default: [name + ".cc"]) and `hdrs` (default: [name + ".h"]).

    Args:
      name: the library's name.
      deps: what the library uses.
      srcs: its sources, when not just <name>.cc ([] for a header-only library).
      hdrs: its headers, when not just <name>.h.
      **kwargs: any other cc_library attribute (copts, testonly, visibility, ...).
    """
    cc_library(
        name = name,
        srcs = srcs if srcs != None else [name + ".cc"],
        hdrs = hdrs if hdrs != None else [name + ".h"],
        deps = deps,
        **kwargs
    )

def cc_test_lib(name, deps = [], **kwargs):
    """A testonly cc_lib: test support (a fixture, a harness, a fake) that only tests link."""
    cc_lib(name = name, deps = deps, testonly = True, **kwargs)

def cc_lib_with_test(
        name,
        deps = [],
        test_deps = [],
        test_size = "small",
        test_copts = [],
        test_data = [],
        **kwargs):
    """A cc_lib `name` and its cc_gtest `name`_test (of <name>_test.cc), which links the library.

    Args:
      name: the library's name; the test is <name>_test.
      deps: what the library uses.
      test_deps: what the test uses besides the library and GoogleTest.
      test_size: the test's size.
      test_copts: the test's copts.
      test_data: the test's data.
      **kwargs: any other cc_lib attribute (srcs, hdrs, copts, testonly, ...) of the library.
    """
    cc_lib(name = name, deps = deps, **kwargs)
    cc_gtest(
        name = name + "_test",
        size = test_size,
        copts = test_copts,
        data = test_data,
        deps = [":" + name] + test_deps,
    )
