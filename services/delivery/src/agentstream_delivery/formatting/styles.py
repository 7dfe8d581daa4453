"""Each platform's markup, as a `Style` of the one Markdown walk (`tree.py`).

Text the model wrote is always escaped for the target, so only the style's own
constructs are markup: Telegram HTML and Slack escape `& < >`, Discord escapes its
Markdown characters with a backslash. Links are kept only for schemes a chat client
opens (http, https, mailto, tg); any other target is shown as text.
"""

from __future__ import annotations

import html
import re

from agentstream_delivery.formatting.tree import RULE, Style, readable_url

LINK_SCHEMES = ("http://", "https://", "mailto:", "tg://")
_DISCORD_SPECIAL = "\\*_~`|<>[]()"  # backslashed wherever they are
_DISCORD_BACKSLASHED = str.maketrans({ch: "\\" + ch for ch in _DISCORD_SPECIAL})
_DISCORD_BLOCK_STARTS = ("#", ">", "+", "-")  # backslashed at the text's start
_DISCORD_ESCAPED = re.compile(r"[\\*_~`|<>\[\]()]|^[#>+-]")  # what either of the two above would escape
_BARE_URL = re.compile(r"(https?://[^\s<>\\`]+)")
_TELEGRAM_TAGS = {"strong": "b", "em": "i", "s": "s"}
_SLACK_MARKS = {"strong": "*", "em": "_", "s": "~"}
_DISCORD_MARKS = {"strong": "**", "em": "*", "s": "~~"}


def openable(href: str) -> bool:
    return href.lower().startswith(LINK_SCHEMES)


class PlainStyle(Style):
    """Signal, SMS-like targets and the fallback of a rejected frame: the words, no markup."""

    def link(self, href: str, inner: str, inner_plain: str) -> str:
        return super().link(readable_url(href), inner, inner_plain)


class TelegramHtmlStyle(Style):
    """Bot API `parse_mode: HTML`: b, i, s, code, pre, a, blockquote; nothing nested in itself."""

    def __init__(self) -> None:
        self._quotes = 0

    def text(self, s: str) -> str:
        return html.escape(s, quote=False)

    def wrap(self, kind: str, inner: str) -> str:
        tag = _TELEGRAM_TAGS[kind]
        return f"<{tag}>{inner}</{tag}>" if inner else inner

    def code(self, content: str) -> str:
        return f"<code>{html.escape(content, quote=False)}</code>"

    def link(self, href: str, inner: str, inner_plain: str) -> str:
        if not openable(href) or not inner:
            return super().link(self.text(readable_url(href)), inner, inner_plain)
        return f'<a href="{html.escape(href, quote=True)}">{inner}</a>'

    def heading(self, level: int, inner: str) -> str:
        return f"<b>{inner}</b>" if inner else inner

    def code_block(self, lang: str, content: str) -> str:
        body = html.escape(content.rstrip("\n"), quote=False)
        if lang:
            return f'<pre><code class="language-{html.escape(lang, quote=True)}">{body}</code></pre>'
        return f"<pre>{body}</pre>"

    def quote(self, inner: str) -> str:
        # A blockquote cannot hold another one: the walk renders inner quotes first, so
        # their tags are dropped and the outer quote keeps the text.
        flat = inner.replace("<blockquote>", "").replace("</blockquote>", "")
        return f"<blockquote>{flat}</blockquote>" if flat else flat


class SlackMrkdwnStyle(Style):
    """Slack mrkdwn: *bold*, _italic_, ~strike~, `code`, ``` blocks, <url|text> links, & < > escaped."""

    def text(self, s: str) -> str:
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    def wrap(self, kind: str, inner: str) -> str:
        mark = _SLACK_MARKS[kind]
        return f"{mark}{inner}{mark}" if inner.strip() else inner

    def code(self, content: str) -> str:
        return f"`{self.text(content)}`" if "`" not in content else self.text(content)

    def link(self, href: str, inner: str, inner_plain: str) -> str:
        if not openable(href):
            return super().link(self.text(readable_url(href)), inner, inner_plain)
        url = readable_url(href).replace("|", "%7C").replace(">", "%3E").replace("<", "%3C")
        label = self.text(inner_plain).replace("|", "¦")
        return f"<{url}|{label}>" if label and inner_plain != href else f"<{url}>"

    def heading(self, level: int, inner: str) -> str:
        return f"*{inner}*" if inner.strip() else inner

    def code_block(self, lang: str, content: str) -> str:
        return "```\n" + self.text(content.rstrip("\n").replace("```", "`\u200b``")) + "\n```"

    def quote(self, inner: str) -> str:
        return "\n".join("&gt; " + line for line in inner.split("\n"))

    def rule(self) -> str:
        return RULE


class DiscordMarkdownStyle(Style):
    """Discord's Markdown: # headings up to three levels, masked links, ``` blocks with a language."""

    def text(self, s: str) -> str:
        if _DISCORD_ESCAPED.search(s) is None:  # most runs of words: nothing to escape, no URL to look for
            return s
        # Discord links bare URLs itself: a backslash in one would break it, so they stay as written.
        if "http" not in s:  # no bare URL (`_BARE_URL` starts with it)
            out = s.translate(_DISCORD_BACKSLASHED)
        else:
            parts = _BARE_URL.split(s)
            out = "".join(p if i % 2 else p.translate(_DISCORD_BACKSLASHED) for i, p in enumerate(parts))
        # A fragment may start a line: a leading `#`, `-`, `+` or `>` would start a block there.
        return "\\" + out if out[:1] in _DISCORD_BLOCK_STARTS else out

    def wrap(self, kind: str, inner: str) -> str:
        mark = _DISCORD_MARKS[kind]
        return f"{mark}{inner}{mark}" if inner.strip() else inner

    def code(self, content: str) -> str:
        if "`" in content:
            return f"`` {content} ``" if "``" not in content else self.text(content)
        return f"`{content}`"

    def link(self, href: str, inner: str, inner_plain: str) -> str:
        if not openable(href):
            return super().link(self.text(readable_url(href)), inner, inner_plain)
        url = readable_url(href).replace("(", "%28").replace(")", "%29").replace(" ", "%20")
        return f"[{inner}]({url})" if inner_plain != href else f"<{url}>"

    def heading(self, level: int, inner: str) -> str:
        if level <= 3:
            return "#" * level + " " + inner
        return f"**{inner}**" if inner.strip() else inner

    def code_block(self, lang: str, content: str) -> str:
        return f"```{lang}\n" + content.rstrip("\n").replace("```", "`\u200b``") + "\n```"

    def bullet(self, depth: int, number: int | None) -> str:
        return f"{number}." if number is not None else "-"

    def rule(self) -> str:
        return RULE
