"""Grant options as people see them: the choices of the consent forms (``attach_choices``),
the describe answer a browser device signs, and a grant's options in words ("Only this
time", "Until 27 Nov, 18:00 UTC", "Only when path starts with /home/bob/docs/") on the
connection pages, the owner's pages and the admin."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, JsonResponse, QueryDict
from django.utils import dateformat, timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from hashee.errors import HasheeError
from portal.common import error_messages
from portal.grant_choices import (
    DURATION_TEXT,
    KEEP,
    GrantRequest,
    Narrowing,
    ReadBack,
    narrowings,
    read_back,
    tools_of,
    value_text,
)
from portal.presentation import ScopeView, fallback_text, labels_of
from relations.models import Relation
from relations.selectors import Connection

DESCRIBE_HEADER = "HTTP_X_HASHEE_DESCRIBE"


# --- the describe answer -------------------------------------------------------------------------

def describing(request: HttpRequest) -> bool:
    """A consent form posted to be described (``X-Hashee-Describe: 1``), not sent."""
    return request.method == "POST" and request.META.get(DESCRIBE_HEADER) == "1"


def describe_answer(asked: GrantRequest | None, problem: HasheeError | None) -> JsonResponse:
    if problem is not None:
        return JsonResponse(problem.as_body(), status=problem.http_status)
    assert asked is not None  # a describe is a POST: _asked answers one or the other
    return JsonResponse(asked.as_body())


def problem_messages(problem: HasheeError) -> list[str]:
    """The problems the page cannot show beside a permission's choices (those it can are
    shown there, see ``attach_choices``)."""
    return error_messages([d for d in problem.details if not str(d.get("path", "")).startswith("/grant_options/")])


# --- the grant options in force --------------------------------------------------------------------

def _ms(now: datetime) -> int:
    return int(now.timestamp() * 1000)


def stored_options(relation: Relation) -> dict[str, dict[str, Any]]:
    return relation.grant_options if isinstance(relation.grant_options, dict) else {}


def expired(options: dict[str, Any], now: datetime) -> bool:
    until = options.get("until")
    return isinstance(until, int) and until <= _ms(now)


def grants_in_force(relation: Relation, *, now: datetime) -> dict[str, dict[str, Any]]:
    """The relation's grant options of the scopes it grants and that have not expired."""
    stored = stored_options(relation)
    return {s: stored[s] for s in relation.granted_scopes
            if isinstance(stored.get(s), dict) and not expired(stored[s], now)}


def expired_scopes(relation: Relation, *, now: datetime) -> dict[str, int]:
    """scope → its ``until`` (epoch ms), for each scope granted until a time now past."""
    stored = stored_options(relation)
    return {s: stored[s]["until"] for s in relation.granted_scopes
            if isinstance(stored.get(s), dict) and expired(stored[s], now)}


# --- in words ------------------------------------------------------------------------------------

def when_text(epoch_ms: int) -> str:
    """A moment as the portal shows one: day, month and time in the portal's time zone."""
    moment = timezone.localtime(datetime.fromtimestamp(epoch_ms / 1000, tz=UTC))
    # Translators: a date format (Django's date syntax): day, short month, 24-hour time, zone.
    return dateformat.format(moment, pgettext("grant until", "j M, H:i T"))


def option_words(scope: str, options: dict[str, Any], manifest: dict[str, Any] | None) -> list[str]:
    """One scope's grant options in plain words, each a line (safe HTML: names as code)."""
    words: list[str] = []
    if options.get("once") is True:
        words.append(_("Only this time"))
    if isinstance(options.get("until"), int):
        words.append(_("Until %(when)s") % {"when": when_text(options["until"])})
    arguments = options.get("arguments")
    tools = {t["name"]: t for t in tools_of(manifest, scope)}
    for name, schema in (arguments.items() if isinstance(arguments, dict) else []):
        words += _argument_words(tools.get(name, {"name": name}), schema, named=len(tools) > 1)
    return words


def _code(text: Any) -> SafeString:
    return format_html("<code>{}</code>", text)


def _said(text: str, **values: Any) -> SafeString:
    """Our (translated) ``text`` with each value escaped, as code: names and values are the
    owner's or the user's, never words of ours to translate."""
    return mark_safe(text % {k: _code(v) for k, v in values.items()})  # noqa: S308 - values escaped by _code


def _argument_words(tool: dict[str, Any], schema: Any, *, named: bool) -> list[SafeString]:
    found = read_back(tool, schema)
    if not found.ours:
        return [_said(_("“%(tool)s” only within limits set outside this page"), tool=tool["name"])]
    titles = {n.prop: n.title for n in narrowings(tool)}
    words = [_said(_("Only when %(arg)s starts with %(prefix)s"), arg=titles.get(p, p), prefix=prefix)
             for p, prefix in found.prefixes.items()]
    for prop, values in found.allowed.items():
        texts = [value_text(v) for v in values]
        words.append(_said(_("Only when %(arg)s is %(value)s"), arg=titles.get(prop, prop), value=texts[0])
                     if len(texts) == 1 else
                     _said(_("Only when %(arg)s is one of: %(values)s"), arg=titles.get(prop, prop),
                           values=", ".join(texts)))
    return [format_html("{}: {}", _code(tool["name"]), w) for w in words] if named else words


@dataclass
class GrantLine:
    """One granted permission, with its options in words (or when it expired)."""

    scope: str
    label: str
    words: list[str] = field(default_factory=list)
    expired_at: str = ""


def grant_lines(connection: Connection, *, now: datetime) -> list[GrantLine]:
    """The connection's permissions in force, then those whose time ran out (read as withdrawn)."""
    relation, state = connection.relation, connection.state
    manifest = relation.agent.capability_manifest
    in_force, ran_out = grants_in_force(relation, now=now), expired_scopes(relation, now=now)
    granted = [s for s in state.granted_scopes if s not in state.pending_scopes and s not in ran_out]
    lines = [GrantLine(v.id, v.label, option_words(v.id, in_force.get(v.id, {}), manifest))
             for v in labels_of(manifest, granted)]
    lines += [GrantLine(v.id, v.label, expired_at=when_text(ran_out[v.id])) for v in labels_of(manifest, list(ran_out))]
    return lines


# --- the choices of a consent form ---------------------------------------------------------------

@dataclass
class ChoiceField:
    """One narrowing as a form field: a prefix text input, or the enum values as checkboxes."""

    narrowing: Narrowing
    value: str = ""
    options: list[tuple[int, str, bool]] = field(default_factory=list)


@dataclass
class ToolChoices:
    name: str
    description: str
    fields: list[ChoiceField] = field(default_factory=list)
    kept_limit: str = ""  # a limit set outside this page, in words: kept while ticked


@dataclass
class ScopeChoices:
    durations: list[tuple[str, str, bool]]
    tools: list[ToolChoices]
    errors: list[str]

    @property
    def limited(self) -> bool:
        return any(t.fields or t.kept_limit for t in self.tools)

    @property
    def narrowed(self) -> bool:
        """Some narrowing is chosen (the disclosure opens on it)."""
        return any(t.kept_limit or any(f.value or not all(o[2] for o in f.options) for f in t.fields)
                   for t in self.tools)


def attach_choices(views: list[ScopeView], manifest: dict[str, Any] | None, *, data: QueryDict | None,
                   problem: HasheeError | None, now: datetime,
                   current: dict[str, dict[str, Any]] | None = None) -> None:
    """Give each scope its choices, as posted (``data``) or as granted now (``current``)."""
    details = problem.details if problem is not None else []
    for view in views:
        options = (current or {}).get(view.id, {})
        at = f"/grant_options/{view.id}"
        view.choices = ScopeChoices(
            durations=_durations(view.id, options, data, now),
            tools=[_tool_choices(t, options.get("arguments", {}).get(t["name"]), data) for t in tools_of(manifest,
                                                                                                      view.id)],
            errors=[str(d["message"]) for d in details if str(d.get("path", "")) in (at, "/granted_scopes")
                    or str(d.get("path", "")).startswith(at + "/")])


def _durations(scope: str, options: dict[str, Any], data: QueryDict | None, now: datetime) -> list[tuple[str, str, bool]]:
    choices = [(value, str(text)) for value, text in DURATION_TEXT.items()]
    if isinstance(options.get("until"), int) and not expired(options, now):
        choices.insert(0, (KEEP, _("Until %(when)s, as now") % {"when": when_text(options["until"])}))
    default = KEEP if choices[0][0] == KEEP else "once" if options.get("once") is True else "always"
    picked = data.get(f"duration:{scope}", default) if data is not None else default
    return [(value, text, value == picked) for value, text in choices]


def _tool_choices(tool: dict[str, Any], current: Any, data: QueryDict | None) -> ToolChoices:
    choices = ToolChoices(name=tool["name"], description=fallback_text(tool.get("description_fallback")))
    if current is not None and not read_back(tool, current).ours:
        choices.kept_limit = mark_safe(" · ".join(_argument_words(tool, current, named=False)))  # noqa: S308 - each escaped
        return choices
    kept = read_back(tool, current) if current is not None else ReadBack()
    for narrowing in narrowings(tool):
        item = ChoiceField(narrowing)
        if narrowing.kind == "prefix":
            item.value = data.get(narrowing.field, "") if data is not None else kept.prefixes.get(narrowing.prop, "")
        else:
            allowed = kept.allowed.get(narrowing.prop, list(narrowing.values))
            ticked = (set(data.getlist(narrowing.field)) if data is not None and f"{narrowing.field}:offered" in data
                      else {str(i) for i, v in enumerate(narrowing.values) if v in allowed})
            item.options = [(i, value_text(v), str(i) in ticked) for i, v in enumerate(narrowing.values)]
        choices.fields.append(item)
    return choices
