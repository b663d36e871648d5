"""embed_files(): compiles files into a C++ table served by ServeEmbeddedFiles.

Example (server/dashboard/BUILD):

    load("//serve/http:embed.bzl", "embed_files")

    embed_files(
        name = "assets",
        srcs = glob(["static/**"]),
        strip_prefix = "static/",
        cpp_namespace = "psync::dashboard",
    )

creates cc_library ":assets" with header "server/dashboard/assets.h" declaring
`psync::dashboard::kFiles`, `kNumFiles` and `Files()`; the file
server/dashboard/static/js/app.js becomes the entry "js/app.js" with content
type "text/javascript; charset=utf-8". Uses only POSIX shell tools (od, sed,
wc, tr): nothing to install beyond coreutils and sed.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

_GENERATOR = "//serve/http:embed_files.sh"

def embed_files(
        name,
        srcs,
        strip_prefix = "",
        cpp_namespace = None,
        visibility = None,
        testonly = False):
    """Generates `name`.h / `name`.cc holding `srcs` and a cc_library `name`.

    Args:
      name: the cc_library's name; also the base name of the generated files.
      srcs: files (source or generated, or filegroups) to embed. Each entry's
        path is relative to this package, minus `strip_prefix`.
      strip_prefix: removed from the front of each relative path.
      cpp_namespace: C++ namespace of the table; default
        psync::embedded::<name>.
      visibility: visibility of the cc_library.
      testonly: passed to the generated rules.
    """
    namespace = cpp_namespace or ("psync::embedded::" + name)
    package = native.package_name()
    header = name + ".h"
    source = name + ".cc"
    include = (package + "/" + header) if package else header
    native.genrule(
        name = name + "_gen",
        srcs = srcs,
        outs = [header, source],
        tools = [_GENERATOR],
        cmd = " ".join([
            "/bin/sh $(location %s)" % _GENERATOR,
            "$(location %s)" % header,
            "$(location %s)" % source,
            "'%s'" % namespace,
            "'%s'" % package,
            "'%s'" % strip_prefix,
            "'%s'" % include,
            "$(SRCS)",
        ]),
        testonly = testonly,
        visibility = ["//visibility:private"],
    )
    cc_library(
        name = name,
        srcs = [source],
        hdrs = [header],
        deps = [
            "//serve/http:static_files",
            "@system//:absl",
        ],
        testonly = testonly,
        visibility = visibility,
    )
