#!/usr/bin/env python3
"""Checks the relative links of the README and the book (docs/src): every linked file exists,
and every #anchor into a Markdown file names one of its headings (mdBook's and GitHub's
slugs). A page's `{{#include FILE}}` lines are read as the text they include, as mdBook renders
them (so links in an included file resolve from the including page, and its headings are the
page's); an include of a missing file is broken too. Prints each broken link as
FILE:LINE: TARGET and exits 1 if there is any."""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
INCLUDE = re.compile(r'^\{\{#include ([^}:\s]+)\}\}\s*$')
LINK = re.compile(r'\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')


def slug(heading):
    text = re.sub(r'`|\*|\[|\]|\([^)]*\)$', '', heading.strip().lower())
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def lines(path):
    """The lines of `path` with whole-file includes expanded: (line number in `path`, text),
    or (line number, None, missing file) for an include that names no file."""
    for number, line in enumerate(open(path, encoding='utf-8'), 1):
        include = INCLUDE.match(line)
        if not include:
            yield number, line
            continue
        included = os.path.normpath(os.path.join(os.path.dirname(path), include.group(1)))
        if not os.path.exists(included):
            yield number, None, include.group(1)
            continue
        for _, *rest in lines(included):
            yield (number, *rest)


def anchors(path):
    found, in_code = set(), False
    for _, line in lines(path):
        if line.startswith('```'):
            in_code = not in_code
        elif not in_code and re.match(r'#{1,6} ', line):
            found.add(slug(line.lstrip('#')))
    return found


def markdown_files():
    yield os.path.join(ROOT, 'README.md')
    for folder, _, names in os.walk(os.path.join(ROOT, 'docs', 'src')):
        for name in sorted(names):
            if name.endswith('.md'):
                yield os.path.join(folder, name)


def broken_links(path):
    in_code = False
    for number, line, *missing in lines(path):
        if line is None:
            yield number, missing[0], 'no such file to include'
            continue
        if line.startswith('```'):
            in_code = not in_code
        if in_code:
            continue
        for target in LINK.findall(line):
            if re.match(r'^[a-z]+:', target):
                continue
            file_part, _, anchor = target.partition('#')
            linked = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(linked):
                yield number, target, 'no such file'
            elif anchor and linked.endswith('.md') and anchor not in anchors(linked):
                yield number, target, 'no such heading'


def main():
    bad = 0
    for path in markdown_files():
        for number, target, why in broken_links(path):
            print(f'{os.path.relpath(path, ROOT)}:{number}: {target} ({why})')
            bad += 1
    print(f'check-links: {bad} broken link(s)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
