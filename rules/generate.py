#!/usr/bin/env python3
"""Renders rdmascope's Prometheus rules for a site, as monitoring mixins are configured: the
files in this directory are the rules with the default parameters, and this script writes them
with yours. Comments, order and texts are kept; only three things change:

--selector MATCHERS     label matchers added to every series selector of an rdmascope metric
                        (rdma_*, rdmascope_*), e.g. 'job="rdmascope"' when the same Prometheus
                        scrapes other exporters that could serve a series of the same name.
                        Default: none (every rdma_* series is rdmascope's). The fleet rules'
                        `up{job=~"rdmascope.*"}` takes these matchers instead of its own.
--cluster-label NAME    the target label that names a cluster (default `cluster`), and
--rack-label NAME       the one that names a rack (default `rack`), in the fleet rules'
                        groupings. Recorded series keep their names (cluster_rack:...).
--runbook-url BASE      where each alert's runbook_url points, without the #anchor
                        (default: http://INSTANCE/runbook, the runbook the exporter that
                        raised the alert serves; INSTANCE is its instance label, with :9879
                        added when it has no port). Set your wiki's copy, or an https://
                        URL when the exporter serves TLS.

Usage: generate.py [--selector M] [--cluster-label N] [--rack-label N] [--runbook-url B]
                   [--check] [OUTPUT_DIR]
Writes every *.rules.yml of this directory to OUTPUT_DIR (default: this directory, which is
what it does after you edit a rule's runbook or the defaults). --check writes nothing and exits
1 if a file differs from what it would write: the test tier runs it on this directory."""

import argparse
import glob
import json
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULTS = {
    "selector": "",
    "cluster_label": "cluster",
    "rack_label": "rack",
    # The exporter that raised the alert; an instance relabelled to a bare host name (as
    # docs/deployment.md does) gets the default port back.
    "runbook_url": 'http://{{ reReplaceAll `^([^:]+)$` `${1}:9879` $labels.instance }}/runbook',
}
# The fleet rules' scrape-health selector, as written with the default parameters.
DEFAULT_UP_MATCHERS = 'job=~"rdmascope.*"'
# rdmascope's own metrics: what --selector applies to. Recorded series (rdma:...) derive from
# selected ones; ALERTS and other exporters' series are not ours to filter.
OWN_METRIC = re.compile(r"(rdma|rdmascope)_\w*")
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
TOKEN = re.compile(r"""
    (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<number>\d[\w.]*)
  | (?P<ident>[A-Za-z_:][\w:]*)
  | (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)
MATCHER = r'\s*[A-Za-z_]\w*\s*(?:=|!=|=~|!~)\s*"(?:\\.|[^"\\])*"\s*'
SELECTOR = re.compile(MATCHER + "(?:," + MATCHER + ")*")
RUNBOOK_LINE = re.compile(r'^(\s*runbook_url:\s*)"?(.*?)(#[\w-]+)"?\s*$')
EXPR_LINE = re.compile(r"^(\s*)(?:-\s+)?expr:\s?(.*)$")


def tokens(expr):
    return [(m.lastgroup, m.group()) for m in TOKEN.finditer(expr)]


def next_significant(toks, i):
    j = i + 1
    while j < len(toks) and toks[j][0] in ("space", "comment"):
        j += 1
    return j


def rewrite_expr(expr, params):
    """The PromQL expression with params applied: selector matchers on every selector of an
    rdmascope metric, the up selector's matchers replaced, cluster and rack renamed in label
    lists. Whitespace and everything else as written."""
    renames = {"cluster": params["cluster_label"], "rack": params["rack_label"]}
    selector = params["selector"]
    toks = tokens(expr)
    out = []
    depth = {"{": 0, "[": 0}
    label_list = None  # paren depth of a by/without/on/ignoring/group_x (...) list
    parens = 0
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        if kind == "other":
            if text in "{[":
                depth[text] += 1
            elif text == "}":
                depth["{"] -= 1
            elif text == "]":
                depth["["] -= 1
            elif text == "(":
                parens += 1
            elif text == ")":
                if label_list == parens:
                    label_list = None
                parens -= 1
        if kind != "ident" or depth["{"] or depth["["]:
            out.append(text)
            i += 1
            continue
        j = next_significant(toks, i)
        following = toks[j][1] if j < len(toks) else ""
        if text in LABEL_LIST_KEYWORDS:
            if following == "(":
                label_list = parens + 1
            out.append(text)
        elif label_list is not None:
            out.append(renames.get(text, text))
        elif following == "(":  # a function or aggregation
            out.append(text)
        elif text == "up" and following == "{" and selector:
            # up{job=~"rdmascope.*"}: the site's matchers say which targets are rdmascope.
            close = next(k for k in range(j, len(toks)) if toks[k][1] == "}")
            written = "".join(t for _, t in toks[j + 1:close])
            if written.strip() != DEFAULT_UP_MATCHERS:
                raise ValueError(f"up{{{written}}}: only up{{{DEFAULT_UP_MATCHERS}}} is known")
            out.append("up{" + selector + "}")
            i = close + 1
            continue
        elif OWN_METRIC.fullmatch(text) and selector:
            if following == "{":
                out.append(text + "".join(t for _, t in toks[i + 1:j]) + "{" + selector)
                k = next_significant(toks, j)
                if k < len(toks) and toks[k][1] != "}":
                    out.append(",")
                depth["{"] += 1
                i = j + 1
                continue
            out.append(text + "{" + selector + "}")
        else:
            out.append(text)
        i += 1
    return "".join(out)


def expr_regions(lines):
    """(first line, end line, column) of each `expr:` value: the rest of its line, or the
    lines of its block scalar (`expr: |`)."""
    i = 0
    while i < len(lines):
        m = EXPR_LINE.match(lines[i])
        if not m:
            i += 1
            continue
        value_column = m.start(2)
        if m.group(2).strip() in ("|", ">", "|-", ">-"):
            indent = len(lines[i]) - len(lines[i].lstrip())
            end = i + 1
            while end < len(lines) and (not lines[end].strip() or
                                         len(lines[end]) - len(lines[end].lstrip()) > indent):
                end += 1
            yield i + 1, end, 0
            i = end
        else:
            yield i, i + 1, value_column
            i += 1


def render(text, params):
    lines = text.split("\n")
    for start, end, column in expr_regions(lines):
        region = "\n".join(lines[start:end])
        head, body = region[:column], region[column:]
        lines[start:end] = (head + rewrite_expr(body, params)).split("\n")
    for i, line in enumerate(lines):
        if m := RUNBOOK_LINE.match(line):
            # Quoted as JSON (a YAML double-quoted scalar): a site's URL may hold ": " or " #".
            lines[i] = m.group(1) + json.dumps(params["runbook_url"] + m.group(3))
    rendered = "\n".join(lines)
    check_rendering(text, rendered, params)
    return rendered


def check_rendering(text, rendered, params):
    """The text edit did what rewrite_expr does to each parsed expression (a block scalar or
    quoting it mishandled would show here), and the YAML is otherwise the same."""
    before, after = yaml.safe_load(text), yaml.safe_load(rendered)
    for group_before, group_after in zip(before["groups"], after["groups"]):
        for rule_before, rule_after in zip(group_before["rules"], group_after["rules"]):
            name = rule_before.get("alert") or rule_before.get("record")
            if rule_after["expr"].strip() != rewrite_expr(rule_before["expr"], params).strip():
                raise ValueError(f"{name}: the rendered expression is not the rewritten one")
            url = rule_after.get("annotations", {}).get("runbook_url")
            if url is not None and not url.startswith(params["runbook_url"] + "#"):
                raise ValueError(f"{name}: runbook_url {url!r} was not rewritten")


def main(argv):
    parser = argparse.ArgumentParser(
        description="Render rdmascope's Prometheus rules with a site's selector, cluster and "
                    "rack labels and runbook URL.",
        epilog="The files in rules/ are this script's output with the defaults shown.")
    parser.add_argument("--selector", default=DEFAULTS["selector"], metavar="MATCHERS",
                        help="label matchers for every rdmascope series, e.g. 'job=\"rdmascope\"'"
                             " (default: none)")
    parser.add_argument("--cluster-label", default=DEFAULTS["cluster_label"], metavar="NAME",
                        help="the target label naming a cluster (default: %(default)s)")
    parser.add_argument("--rack-label", default=DEFAULTS["rack_label"], metavar="NAME",
                        help="the target label naming a rack (default: %(default)s)")
    parser.add_argument("--runbook-url", default=DEFAULTS["runbook_url"], metavar="BASE",
                        help="runbook URL before '#anchor' (default: %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a file differs from its rendering")
    parser.add_argument("output_dir", nargs="?", default=HERE, metavar="OUTPUT_DIR")
    args = parser.parse_args(argv)
    label = re.compile(r"[A-Za-z_]\w*")
    for name in ("cluster_label", "rack_label"):
        if not label.fullmatch(getattr(args, name)):
            parser.error(f"--{name.replace('_', '-')}: {getattr(args, name)!r} is not a label name")
    if args.selector and not SELECTOR.fullmatch(args.selector):
        parser.error(f"--selector: {args.selector!r} is not a comma-separated list of label "
                     'matchers such as job="rdmascope" (no braces)')
    if "#" in args.runbook_url:
        parser.error("--runbook-url: give the URL without '#anchor'")
    params = {k: getattr(args, k) for k in DEFAULTS}
    differing = []
    for source in sorted(glob.glob(os.path.join(HERE, "*.rules.yml"))):
        with open(source, encoding="utf-8") as f:
            text = f.read()
        # The files here hold the defaults: render from them as they are.
        rendered = render(text, params)
        target = os.path.join(args.output_dir, os.path.basename(source))
        if args.check:
            if rendered != text:
                differing.append(os.path.basename(source))
            continue
        os.makedirs(args.output_dir, exist_ok=True)
        with open(target, "w", encoding="utf-8") as f:
            f.write(rendered)
        print(f"wrote {target}")
    if differing:
        print("FAIL: not what rules/generate.py renders with the defaults (run it): "
              + ", ".join(differing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
