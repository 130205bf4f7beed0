"""kiln_fuzz_target: one libFuzzer target, buildable in every configuration.

Under --config=fuzz (clang-16, see .bazelrc) the binary links libFuzzer's main.
Elsewhere it links replay_main.cc, which runs the target once per file, so the
default g++ build compiles every target and `<name>_corpus_test` replays its seed
corpus and regressions (under --config=asan too, with the sanitizers on).
"""

def kiln_fuzz_target(name, srcs, deps, corpus = None):
    """cc_binary `name` and `<name>_corpus_test`.

    Its seed corpus is fuzz/corpus/<corpus> (default: <name>), its regressions
    fuzz/regressions/<name>. scripts/fuzz.sh reads `corpus` from this file.
    """
    corpus = corpus or name
    native.cc_library(
        name = name + "_lib",
        srcs = srcs,
        deps = deps,
        alwayslink = True,
        visibility = ["//visibility:private"],
    )

    native.cc_binary(
        name = name,
        deps = [":" + name + "_lib"] + select({
            ":fuzzing": [],
            "//conditions:default": [":replay_main"],
        }),
        linkopts = select({
            ":fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )

    inputs = ["corpus/%s" % corpus]
    data = native.glob(["corpus/%s/*" % corpus])
    regressions = native.glob(["regressions/%s/*" % name])
    if regressions:
        inputs.append("regressions/%s" % name)
        data += regressions
    native.cc_test(
        name = name + "_corpus_test",
        size = "small",
        args = ["fuzz/" + d for d in inputs],
        data = data,
        deps = [
            ":" + name + "_lib",
            ":replay_main",
        ],
    )
