#!/usr/bin/env python3
"""Checks the relative links of README.md and docs/*.md.

Every relative Markdown link (inline `[text](target)`, images, and
reference definitions `[ref]: target`) must name a file or directory that
exists, and a `#anchor` on a Markdown file (or on the page itself) must
match one of its headings, slugged as GitHub slugs them: lowercase,
punctuation dropped except hyphens and underscores, each space a hyphen,
and a repeated heading gets -1, -2, ... Explicit `<a name=...>` / `id=...`
anchors count too. Links with a scheme (http:, https:, mailto:, ...) are
not checked, nor is anything inside a code block or a code span.

Prints each broken link as `FILE:LINE: broken link TARGET (why)` and exits
1 if there is one; else prints one line with the counts. Standard library
only. Usage: check-docs.py [ROOT] (default: the checkout this script is in).
"""

import re
import sys
import urllib.parse
from pathlib import Path

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target "title"): the text may hold one level of brackets.
INLINE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^\s()]+)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s[^>]*?(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.I)


def prose_lines(text):
    """(line number, line) for every line outside fenced or indented code
    blocks, with code spans blanked out (same length, so columns hold)."""
    fence = None
    prev_blank = True
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            prev_blank = False
            continue
        if m:
            fence = m.group(1)
            continue
        if prev_blank and (line.startswith("    ") or line.startswith("\t")):
            # an indented code block (it goes on while lines stay indented)
            continue
        prev_blank = line.strip() == ""
        yield number, CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line)


def heading_texts(text):
    """The raw text of every heading, ATX and setext, in order."""
    fence = None
    prev = None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            prev = None
            continue
        if m:
            fence = m.group(1)
            prev = None
            continue
        a = ATX.match(line)
        if a:
            yield (a.group(2) or "").strip()
            prev = None
            continue
        if prev is not None and SETEXT.match(line):
            yield prev.strip()
            prev = None
            continue
        stripped = line.strip()
        paragraph = stripped and not re.match(r"^([-*+>|]|\d+[.)]\s)", stripped)
        prev = line if paragraph and not line.startswith("    ") else None


def plain(heading):
    """A heading's text as GitHub renders it: links and images reduced to
    their text, code spans kept verbatim, HTML tags and emphasis dropped."""
    spans = []

    def keep(m):
        spans.append(m.group(2))
        return "\0%d\0" % (len(spans) - 1)

    s = CODE_SPAN.sub(keep, heading)
    s = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"<[^>]+>", "", s)
    s = s.replace("*", "")
    s = re.sub(r"(?<![^\W_])_+|_+(?![^\W_])", "", s)  # _emphasis_, not snake_case
    return re.sub(r"\0(\d+)\0", lambda m: spans[int(m.group(1))], s)


def slugify(heading):
    s = plain(heading).lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(text):
    """Every anchor a page offers: heading slugs (duplicates numbered) and
    explicit HTML anchors."""
    seen = {}
    found = set()
    for heading in heading_texts(text):
        base = slugify(heading)
        slug = base
        n = seen.get(base, 0)
        while slug in found:
            n += 1
            slug = "%s-%d" % (base, n)
        seen[base] = n
        found.add(slug)
    for _, line in prose_lines(text):
        found.update(HTML_ANCHOR.findall(line))
    return found


def links(text):
    """(line number, target) of every link outside code."""
    for number, line in prose_lines(text):
        for m in INLINE.finditer(line):
            yield number, m.group(1)
        m = REFDEF.match(line)
        if m:
            yield number, m.group(1)


def check(root, files):
    """Returns (problems, links checked, anchors checked)."""
    root = Path(root)
    problems = []
    counted = anchored = 0
    cache = {}

    def page_anchors(path):
        if path not in cache:
            cache[path] = anchors(path.read_text(encoding="utf-8"))
        return cache[path]

    for file in files:
        text = file.read_text(encoding="utf-8")
        name = file.relative_to(root).as_posix()
        for number, target in links(text):
            target = target[1:-1] if target.startswith("<") else target
            if SCHEME.match(target):
                continue
            counted += 1
            path_part, _, anchor = target.partition("#")
            dest = file if not path_part else (file.parent / urllib.parse.unquote(path_part))
            if not dest.exists():
                problems.append("%s:%d: broken link %s (no such file: %s)" % (name, number, target, path_part))
                continue
            if not anchor:
                continue
            if dest.is_dir() or dest.suffix.lower() not in (".md", ".markdown"):
                continue  # GitHub's line anchors and the like are not headings
            anchored += 1
            if urllib.parse.unquote(anchor) not in page_anchors(dest.resolve()):
                where = "this page" if not path_part else path_part
                problems.append("%s:%d: broken link %s (no heading #%s in %s)" % (name, number, target, anchor, where))
    return problems, counted, anchored


def main(argv):
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    files = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    files = [f for f in files if f.is_file()]
    problems, counted, anchored = check(root, files)
    for p in problems:
        print(p)
    if problems:
        print("docs: %d broken link(s)" % len(problems), file=sys.stderr)
        return 1
    print("docs: ok (%d files, %d relative links, %d of them with an anchor)" % (len(files), counted, anchored))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
