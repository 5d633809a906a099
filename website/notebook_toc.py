"""mkdocs hook: a notebook page's table of contents links to its headings as the page names them.

mkdocs-jupyter writes a notebook's headings (through nbconvert) and its table of contents
(through Python-Markdown) with two slug rules that part where a heading holds code: "2. Launch
order and L2: `GROUP_SIZE_M`" is #2-launch-order-and-l2-group_size_m on the page and
#2-launch-order-and-l2 in the contents, a link to nowhere. The contents take the page's ids,
heading by heading, in order; where the two do not list the same number of headings, nothing
is changed (and the site's browser check names the broken anchors).
"""
import re

HEADING_ID = re.compile(r"<h[1-6][^>]*\bid=\"([^\"]+)\"")


def on_page_content(html, page, **kwargs):
    if not page.file.src_uri.endswith(".ipynb"):
        return html
    entries = list(_flatten(page.toc))
    ids = HEADING_ID.findall(html)
    if len(ids) == len(entries):
        for entry, heading_id in zip(entries, ids):
            entry.id = heading_id
    return html


def _flatten(entries):
    for entry in entries:
        yield entry
        yield from _flatten(entry.children)
