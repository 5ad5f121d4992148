"""A user's devices: the keys tool calls are encrypted to (SPEC §9.2). The first device
is trusted on first use; a later one waits until an approved device approves it — the
portal cannot approve (the server never holds a device's private key), it can only show
the state and revoke."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from hashee.api import acting_user
from hashee.errors import HasheeError
from portal.common import AuthenticatedHttpRequest, not_found
from toolcalls import keydir_selectors as keydir_selectors
from toolcalls.keydir_services import device_key_revoke


@login_required
def devices(request: AuthenticatedHttpRequest) -> HttpResponse:
    return render(request, "portal/devices.html", {"devices": keydir_selectors.devices(user=acting_user(request))})


@require_POST
@login_required
def device_revoke(request: HttpRequest, device_id: str) -> HttpResponse:
    try:
        device_key_revoke(user=acting_user(request), device_id=device_id)
    except HasheeError:
        return not_found(request)
    messages.success(request, _("Device %(device)s revoked: agents no longer encrypt to it.") % {"device": device_id})
    return redirect("portal:devices")
