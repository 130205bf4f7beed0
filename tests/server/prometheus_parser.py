#!/usr/bin/python3
"""A strict parser of Prometheus's text exposition format (0.0.4), for tests.

Reads a page on stdin. On success prints a JSON object {series: value}, a
series being 'name{label="value",...}' with labels sorted and values
unescaped, and exits 0; on the first violation prints it to stderr and exits 1.

Checked beyond the grammar: every sample belongs to a family announced by
one HELP and one TYPE line before it; a family's samples are contiguous; no
series repeats; counters end in _total and are not negative; a histogram's
buckets have an ascending 'le', are cumulative, end with le="+Inf", and its
_count equals the +Inf bucket; the page ends with a newline.
"""
import json
import math
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class Invalid(Exception):
    pass


def parse_float(text):
    if text in ("+Inf", "Inf"):
        return math.inf
    if text == "-Inf":
        return -math.inf
    if text == "NaN":
        return math.nan
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise Invalid("bad value %r" % text)
    return float(text)


def parse_labels(text, at):
    """Parses '{a="x",b="y"}' starting at text[at] == '{'; returns (labels, end)."""
    labels = {}
    i = at + 1
    while True:
        if i < len(text) and text[i] == "}":
            return labels, i + 1
        m = re.compile(LABEL).match(text, i)
        if not m:
            raise Invalid("bad label name at %r" % text[i:])
        name = m.group(0)
        if name.startswith("__"):
            raise Invalid("reserved label name %r" % name)
        i = m.end()
        if text[i:i + 2] != '="':
            raise Invalid("expected =\" after label %r" % name)
        i += 2
        value = []
        while True:
            if i >= len(text):
                raise Invalid("unterminated label value")
            c = text[i]
            if c == "\\":
                nxt = text[i + 1:i + 2]
                if nxt == "\\":
                    value.append("\\")
                elif nxt == '"':
                    value.append('"')
                elif nxt == "n":
                    value.append("\n")
                else:
                    raise Invalid("bad escape \\%s in label value" % nxt)
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                raise Invalid("raw newline in label value")
            else:
                value.append(c)
                i += 1
        if name in labels:
            raise Invalid("label %r twice" % name)
        labels[name] = "".join(value)
        if i < len(text) and text[i] == ",":
            i += 1
        elif i < len(text) and text[i] == "}":
            continue
        else:
            raise Invalid("expected , or } after label value")


def series_key(name, labels):
    inner = ",".join('%s="%s"' % (k, labels[k]) for k in sorted(labels))
    return "%s{%s}" % (name, inner)


def family_of(name, types):
    """The announced family a sample name belongs to."""
    if name in types and types[name] != "histogram":
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            base = name[: -len(suffix)]
            if types.get(base) == "histogram":
                return base
    raise Invalid("sample %r has no TYPE before it" % name)


def parse(page):
    if not page.endswith("\n"):
        raise Invalid("the page does not end with a newline")
    helps, types, done = {}, {}, set()
    current = None
    series = {}
    histograms = {}  # (family, labels without le) -> list of (le, value)
    counts = {}
    for number, line in enumerate(page[:-1].split("\n"), 1):
        try:
            if line == "":
                raise Invalid("empty line")
            if line.startswith("#"):
                m = re.fullmatch(r"# (HELP|TYPE) (%s) (.*)" % NAME, line)
                if not m:
                    if re.match(r"#\s*(HELP|TYPE)", line):
                        raise Invalid("malformed %r" % line)
                    continue  # a comment
                kind, name, rest = m.groups()
                if name in done:
                    raise Invalid("family %r announced again after its samples" % name)
                if current is not None and current != name:
                    done.add(current)
                current = name
                if kind == "HELP":
                    if name in helps:
                        raise Invalid("second HELP for %r" % name)
                    if re.search(r"\\[^\\n]", rest.replace("\\\\", "")):
                        raise Invalid("bad escape in HELP of %r" % name)
                    helps[name] = rest
                else:
                    if name in types:
                        raise Invalid("second TYPE for %r" % name)
                    if rest not in TYPES:
                        raise Invalid("unknown type %r" % rest)
                    types[name] = rest
                continue
            m = re.compile(NAME).match(line)
            if not m:
                raise Invalid("bad metric name")
            name = m.group(0)
            i = m.end()
            labels = {}
            if i < len(line) and line[i] == "{":
                labels, i = parse_labels(line, i)
            rest = line[i:]
            m = re.fullmatch(r" (\S+)( -?\d+)?", rest)
            if not m:
                raise Invalid("expected ' value [timestamp]' in %r" % rest)
            value = parse_float(m.group(1))
            family = family_of(name, types)
            if family != current:
                raise Invalid("sample %r outside its family's block" % name)
            if family not in helps:
                raise Invalid("family %r has no HELP" % family)
            kind = types[family]
            key = series_key(name, labels)
            if key in series:
                raise Invalid("series %s twice" % key)
            series[key] = value
            if kind == "counter":
                if not name.endswith("_total"):
                    raise Invalid("counter %r does not end in _total" % name)
                if not value >= 0:
                    raise Invalid("counter %s is %r" % (key, value))
            if kind == "histogram":
                base = dict(labels)
                le = base.pop("le", None)
                group = (family, series_key("", base))
                if name.endswith("_bucket"):
                    if le is None:
                        raise Invalid("bucket without le")
                    histograms.setdefault(group, []).append((parse_float(le), value))
                elif le is not None:
                    raise Invalid("le on %r" % name)
                elif name.endswith("_count"):
                    counts[group] = value
        except Invalid as e:
            raise Invalid("line %d: %s" % (number, e))
    for group, buckets in histograms.items():
        les = [le for le, _ in buckets]
        if les != sorted(les) or len(set(les)) != len(les):
            raise Invalid("%s: le not ascending" % (group,))
        if les[-1] != math.inf:
            raise Invalid("%s: no +Inf bucket" % (group,))
        values = [v for _, v in buckets]
        if values != sorted(values):
            raise Invalid("%s: buckets not cumulative" % (group,))
        if counts.get(group) != values[-1]:
            raise Invalid("%s: _count is not the +Inf bucket" % (group,))
    for group in counts:
        if group not in histograms:
            raise Invalid("%s: _count without buckets" % (group,))
    return series


def main():
    try:
        series = parse(sys.stdin.read())
    except Invalid as e:
        print(e, file=sys.stderr)
        return 1
    json.dump({k: (v if math.isfinite(v) else str(v)) for k, v in series.items()}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
