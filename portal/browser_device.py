"""This browser as one of the user's devices (SPEC §12.2): the page only. Everything it does
— the keys, the approvals, the answers to tool calls — happens in the browser, in the
static module portal/static/portal/device/device.js (built from portal/device_src/ with
@hashee/sdk), over the same APIs every client uses (``/keys/devices``, ``/ws/events``).
The server never sees a private key; this view hands the page its texts, nothing else."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

from portal.common import AuthenticatedHttpRequest
from portal.presentation import PRESET_SCOPE_TEXT, SENSITIVITY_TEXT


@login_required
def browser_device(request: AuthenticatedHttpRequest) -> HttpResponse:
    return render(request, "portal/device.html", {"device_texts": device_texts()})


def device_texts() -> dict[str, Any]:
    """The texts the module shows, translated for the page's language."""
    return {
        "scopes": {scope: str(label) for scope, (label, _description) in PRESET_SCOPE_TEXT.items()},
        "sensitivity": {level: str(label) for level, (label, _explanation) in SENSITIVITY_TEXT.items()},
        "countdown": _("Denied in %(s)s s unless you answer"),
        "unverified": _("Publisher unverified: this agent has no identity key"),
        "version": _("version %(v)s"),
        "no_arguments": _("(no arguments)"),
        "this_browser": _("this browser"),
        "approved": _("Approved"),
        "waiting": _("Waiting for approval"),
        "approved_toast": _("Device %(device)s approved"),
        "failed": _("That did not work: %(message)s"),
        "confirm_remove": _("Remove this device? Agents stop sending it tool calls, and its keys are deleted "
                            "from this browser."),
        "verified": _("Verified"),
        "identity_changed": _("Identity changed: calls are refused until you check the new number"),
        "status": {"ok": _("answered"), "denied": _("denied"), "error": _("failed"), "refused": _("refused")},
        # A grant's options in words (SPEC §5.2 v1.2), as the portal's pages say them, and the 90-day notice.
        "grant_once": _("Only this time"),
        "grant_until": _("Until %(when)s"),
        "grant_prefix": _("Only when %(arg)s starts with %(prefix)s"),
        "grant_values": _("Only when %(arg)s is %(value)s"),
        "grant_one_of": _("Only when %(arg)s is one of: %(values)s"),
        "grant_limited": _("Only within limits you set for %(tool)s"),
        "unused_title": _("Permissions you have not used for %(days)s days"),
        "unused_intro": _("This device has not answered a call of these permissions for a long time. Withdraw what "
                          "you no longer need."),
        "unused_row": _("%(agent)s: %(scope)s, unused since %(since)s"),
        "unused_withdraw": _("Withdraw"),
        "unused_keep": _("Keep"),
        "withdraw_failed": _("used once; not yet withdrawn on the server, refused here"),
    }
