"""Markdown written by an agent, as HTML the panel can show.

The agent is untrusted: its text may carry HTML, script URLs or images that call home. Raw
HTML is escaped (markdown-it's ``html`` option off), ``javascript:``/``vbscript:``/``data:``
links stay text (markdown-it's own link check), images are not rendered (an image would
load a URL the agent chose as soon as the page opens), and every link opens without a
referrer or a handle on the panel.
"""

from __future__ import annotations

from functools import cache

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt


@cache
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).disable("image")

    def link_open(renderer, tokens, idx, options, env):
        tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
        tokens[idx].attrSet("target", "_blank")
        return renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("link_open", link_open)
    return md


def to_html(text: str) -> SafeString:
    return mark_safe(_parser().render(text or ""))  # noqa: S308 - escaped by the parser
