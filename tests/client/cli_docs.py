"""The help text in the docs, generated from the binaries' real --help.

    cli_docs.py --check|--update PROGRAM=BINARY... -- FILE.md...

Each FILE.md holds regions

    <!-- BEGIN generated help: PROGRAM -->
    ...
    <!-- END generated help: PROGRAM -->

filled with `PROGRAM --help` and, for a program with commands (listed under
"Subcommands:"), each `PROGRAM COMMAND --help`. --update rewrites the regions;
--check exits 1 naming every region that differs from what the binary prints
(the test that keeps the docs honest). Regenerate after changing a flag:

    bazel build //client:kiln //bench:kiln-bench
    /usr/bin/python3 tests/client/cli_docs.py --update kiln=bazel-bin/client/kiln \\
        kiln-bench=bazel-bin/bench/kiln-bench -- README.md bench/README.md
"""
import re
import subprocess
import sys


def help_text(binary, *words):
    r = subprocess.run([binary, *words, "--help"], capture_output=True, text=True)
    if r.returncode != 0 or r.stderr:
        raise SystemExit(f"{binary} {' '.join(words)} --help: exit {r.returncode}, "
                         f"stderr {r.stderr!r}")
    return r.stdout.rstrip("\n")


def commands(top_help):
    """The command names under "Subcommands:" in a program's --help."""
    m = re.search(r"^Subcommands:\n((?:  \S.*\n?)+)", top_help, re.M)
    return [line.split()[0] for line in m.group(1).splitlines()] if m else []


def region(program, binary):
    top = help_text(binary)
    out = [f"```text\n$ {program} --help\n{top}\n```"]
    for command in commands(top):
        out.append(f"<details><summary><code>{program} {command} --help</code></summary>\n\n"
                   f"```text\n{help_text(binary, command)}\n```\n</details>")
    return "\n\n".join(out)


def main(argv):
    mode = argv[1]
    split = argv.index("--")
    binaries = dict(a.split("=", 1) for a in argv[2:split])
    stale, found = [], set()
    for path in argv[split + 1:]:
        text = open(path).read()
        new = text
        for program, binary in binaries.items():
            pattern = re.compile(
                rf"(<!-- BEGIN generated help: {re.escape(program)} -->\n)(.*?)"
                rf"(<!-- END generated help: {re.escape(program)} -->)", re.S)
            if not pattern.search(new):
                continue
            found.add(program)
            body = region(program, binary) + "\n"
            new = pattern.sub(lambda m: m.group(1) + body + m.group(3), new)
            if new != text and pattern.search(text).group(2) != body:
                stale.append(f"{path}: {program}")
        if mode == "--update" and new != text:
            open(path, "w").write(new)
    stale += [f"no region for {p}" for p in binaries if p not in found]
    if mode == "--check" and stale:
        print("help text in the docs differs from --help (regenerate: see cli_docs.py):",
              *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
