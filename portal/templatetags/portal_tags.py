"""Template helpers of the portal: inline icons, sizes, the socket's starting point."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince
from django.utils.translation import gettext as _

from agents.html import pointer_breaks
from eventlog import webhooks
from eventlog.selectors import latest_event_id
from portal.grant_display import GrantLine, grant_lines
from portal.presentation import AGENT_STATUS_TEXT, SENSITIVITY_TEXT, fallback_text, size_text
from portal.problems import problem_message
from relations.selectors import Connection

register = template.Library()

# 24x24 stroke icons, drawn for this portal (no icon font, no network).
ICONS: dict[str, str] = {
    "bell": '<path d="M18 8a6 6 0 0 0-12 0c0 7-3 9-3 9h18s-3-2-3-9"/><path d="M13.7 21a2 2 0 0 1-3.4 0"/>',
    "file": '<path d="M14 2H6a2 2 0 0 0-2 2v16a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V8z"/><path d="M14 2v6h6M8 13h8M8 17h5"/>',
    "clipboard": '<path d="M16 4h2a2 2 0 0 1 2 2v14a2 2 0 0 1-2 2H6a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2h2"/>'
                 '<rect x="8" y="2" width="8" height="4" rx="1"/>',
    "pin": '<path d="M21 10c0 7-9 13-9 13s-9-6-9-13a9 9 0 0 1 18 0z"/><circle cx="12" cy="10" r="3"/>',
    "key": '<circle cx="7.5" cy="15.5" r="5.5"/><path d="m21 2-9.6 9.6M15.5 7.5l3 3L22 7l-3-3"/>',
    "high": '<path d="M10.3 3.9 1.8 18a2 2 0 0 0 1.7 3h17a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0z"/>'
            '<path d="M12 9v4M12 17h.01"/>',
    "medium": '<path d="M12 22s8-4 8-10V5l-8-3-8 3v7c0 6 8 10 8 10z"/><path d="M12 8v4M12 16h.01"/>',
    "low": '<path d="M12 22s8-4 8-10V5l-8-3-8 3v7c0 6 8 10 8 10z"/><path d="m9 12 2 2 4-4"/>',
    "plus": '<path d="M12 5v14M5 12h14"/>',
    "agent": '<rect x="4" y="6" width="16" height="13" rx="3"/><path d="M12 2v4M9 12h.01M15 12h.01M9 16h6"/>',
    "history": '<path d="M3 12a9 9 0 1 0 3-6.7L3 8"/><path d="M3 3v5h5M12 7v5l3 2"/>',
    "globe": '<circle cx="12" cy="12" r="10"/><path d="M2 12h20M12 2a15 15 0 0 1 0 20 15 15 0 0 1 0-20z"/>',
    "webhook": '<path d="M13 2 3 14h9l-1 8 10-12h-9l1-8z"/>',
    "users": '<path d="M17 21v-2a4 4 0 0 0-4-4H5a4 4 0 0 0-4 4v2"/><circle cx="9" cy="7" r="4"/>'
             '<path d="M23 21v-2a4 4 0 0 0-3-3.9M16 3.1a4 4 0 0 1 0 7.8"/>',
    "refresh": '<path d="M23 4v6h-6"/><path d="M20.5 15a9 9 0 1 1-2.1-9.4L23 10"/>',
    "copy": '<rect x="9" y="9" width="13" height="13" rx="2"/><path d="M5 15H4a2 2 0 0 1-2-2V4a2 2 0 0 1 2-2h9a2 2 0 0 1 2 2v1"/>',
    "search": '<circle cx="11" cy="11" r="8"/><path d="m21 21-4.3-4.3"/>',
    "link": '<path d="M10 13a5 5 0 0 0 7.5.5l3-3a5 5 0 0 0-7-7l-1.8 1.7"/><path d="M14 11a5 5 0 0 0-7.5-.5l-3 3a5 5 0 0 0 7 7l1.7-1.7"/>',
    "edit": '<path d="M12 20h9"/><path d="M16.5 3.5a2.1 2.1 0 0 1 3 3L7 19l-4 1 1-4z"/>',
    "check": '<path d="M20 6 9 17l-5-5"/>',
    "x": '<path d="M18 6 6 18M6 6l12 12"/>',
    "alert": '<circle cx="12" cy="12" r="10"/><path d="M12 8v4M12 16h.01"/>',
    "settings": '<circle cx="12" cy="12" r="3"/><path d="M19.4 15a1.7 1.7 0 0 0 .3 1.8l.1.1a2 2 0 1 1-2.8 2.8l-.1-.1a1.7 1.7 0 0 0-1.8-.3 1.7 1.7 0 0 0-1 1.5V21a2 2 0 1 1-4 0v-.1a1.7 1.7 0 0 0-1.1-1.5 1.7 1.7 0 0 0-1.8.3l-.1.1a2 2 0 1 1-2.8-2.8l.1-.1a1.7 1.7 0 0 0 .3-1.8 1.7 1.7 0 0 0-1.5-1H3a2 2 0 1 1 0-4h.1a1.7 1.7 0 0 0 1.5-1.1 1.7 1.7 0 0 0-.3-1.8l-.1-.1a2 2 0 1 1 2.8-2.8l.1.1a1.7 1.7 0 0 0 1.8.3H9a1.7 1.7 0 0 0 1-1.5V3a2 2 0 1 1 4 0v.1a1.7 1.7 0 0 0 1 1.5 1.7 1.7 0 0 0 1.8-.3l.1-.1a2 2 0 1 1 2.8 2.8l-.1.1a1.7 1.7 0 0 0-.3 1.8V9a1.7 1.7 0 0 0 1.5 1H21a2 2 0 1 1 0 4h-.1a1.7 1.7 0 0 0-1.5 1z"/>',
    "logout": '<path d="M9 21H5a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2h4M16 17l5-5-5-5M21 12H9"/>',
    "manifest": '<path d="M8 3H7a2 2 0 0 0-2 2v5a2 2 0 0 1-2 2 2 2 0 0 1 2 2v5a2 2 0 0 0 2 2h1"/>'
                '<path d="M16 21h1a2 2 0 0 0 2-2v-5a2 2 0 0 1 2-2 2 2 0 0 1-2-2V5a2 2 0 0 0-2-2h-1"/>',
}


@register.simple_tag
def icon(name: str, css: str = "") -> SafeString:
    paths = ICONS.get(name, ICONS["key"])
    return format_html('<svg class="icon {}" viewBox="0 0 24 24" aria-hidden="true" focusable="false">{}</svg>',
                       css, mark_safe(paths))  # noqa: S308 - constant markup above


@register.simple_tag
def webhook_worker_missing(deliveries: Any) -> bool:
    """True when deliveries wait and no webhook worker has run recently to send them."""
    return any(d.status == "pending" for d in deliveries or ()) and webhooks.webhook_worker_missing()


@register.filter
def size(value: int | None) -> str:
    return size_text(value)


@register.filter
def ago(value: datetime | None) -> str:
    """"just now" under a minute (timesince alone says "0 minutes"), else "5 minutes ago"."""
    if value is None:
        return ""
    if timezone.now() - value < timedelta(minutes=1):
        return _("just now")
    return _("%(t)s ago") % {"t": timesince(value)}


@register.filter
def problem_text(issue: dict[str, str]) -> str:
    """A stored validation problem's message in the page's language."""
    return problem_message(issue.get("code", ""), issue.get("message", ""))


@register.filter
def status_label(status: str) -> str:
    """An agent's registry status in the page's language (the model's labels are English)."""
    return str(AGENT_STATUS_TEXT.get(status, status))


@register.filter
def sensitivity_label(level: str) -> str:
    return str(SENSITIVITY_TEXT.get(level, (level, ""))[0])


@register.filter
def shorthash(value: str | None) -> str:
    return (value or "")[:12]


register.filter("pointer_breaks", pointer_breaks)
register.filter("fallback_text", fallback_text)


@register.simple_tag
def events_since() -> int:
    """Where the page's socket starts: nothing that happens after the render is missed."""
    return latest_event_id()


@register.simple_tag
def portal_js_strings() -> dict[str, Any]:
    """Texts the scripts show, translated for the page's language."""
    return {
        "live": _("Live"), "offline": _("Reconnecting…"), "checking": _("Checking…"), "valid": _("Valid"),
        "syntax": _("Not valid JSON"), "errors_one": _("1 error"), "errors_many": _("%(n)s errors"),
        "warnings_one": _("1 warning"), "warnings_many": _("%(n)s warnings"), "line": _("line %(n)s"),
        "no_problems": _("No problems found."), "save": _("Save version %(v)s"),
        "save_breaking": _("Save version %(v)s (breaking)"), "nothing_to_save": _("No changes to save"),
        "fix_first": _("Fix the errors to continue"), "create": _("Create agent"), "copied": _("Copied"),
        "connected": _("%(user)s connected"), "updated": _("%(user)s reviewed their permissions"),
        "revoked": _("%(user)s disconnected"), "published": _("Version %(v)s published"),
        "reauth": _("Version %(v)s is breaking: re-consent required"),
        "size_warning": _("Manifest size warning for version %(v)s"),
        "status": {"paused": _("Paused by the platform's operators"),
                   "enabled": _("Enabled again by the platform's operators"),
                   "deprecated": _("Deprecated by the platform's operators")},
        "reauth_user": _("An agent you use changed what it asks for. Please review."),
        "line_column": _("line %(n)s, column %(c)s"), "json": json_syntax_texts(),
        "json_expected": {
            "name": _("a property name in double quotes"), "colon": _("':' after the property name"),
            "comma_brace": _("',' or '}'"), "comma_bracket": _("',' or ']'")},
    }


def json_syntax_texts() -> dict[str, str]:
    """The editor's JSON syntax errors (portal/static/portal/jsonlocate.js codes)."""
    return {
        "unterminated_string": _("Unterminated string"), "invalid_escape": _("Invalid escape in a string"),
        "unexpected_end": _("Unexpected end of the text"),
        "unexpected_character": _("Unexpected character %(char)s"), "too_deep": _("Nested too deeply"),
        "trailing_comma_object": _("Trailing comma before }"), "trailing_comma_array": _("Trailing comma before ]"),
        "duplicate_key": _("Duplicate key %(key)s"), "expected": _("Expected %(what)s"),
        "end_expected": _("Unexpected end of the text; expected %(what)s"),
        "text_after": _("Unexpected text after the JSON document"),
    }


@register.filter
def without(values: list[str], removed: list[str]) -> list[str]:
    """``values`` less those in ``removed``, in order (granted scopes less the paused ones)."""
    return [value for value in values if value not in set(removed)]


@register.simple_tag
def grant_lines_of(connection: Connection) -> list[GrantLine]:
    """A connection's permissions with their options in words (the connections list)."""
    return grant_lines(connection, now=timezone.now())
