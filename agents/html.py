"""HTML helpers the operators' admin and the owners' portal share."""

from __future__ import annotations

from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe


def pointer_breaks(value: str | None) -> SafeString:
    """A JSON Pointer as HTML that a narrow column wraps after its slashes, not inside a name."""
    return mark_safe("/<wbr>".join(conditional_escape(part) for part in (value or "").split("/")))  # noqa: S308 - parts escaped
