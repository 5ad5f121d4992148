"""Forms of the portal. They check shape only; every rule lives in the services."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from agents.models import CHANGE_NOTE_MAX

MANIFEST_WIDGET = forms.Textarea(attrs={"spellcheck": "false", "wrap": "off", "autocomplete": "off",
                                        "autocapitalize": "off", "rows": 28, "data-editor-input": ""})


class AgentCreateForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=100)
    description = forms.CharField(label=_("Description"), max_length=2000, required=False,
                                  widget=forms.Textarea(attrs={"rows": 3}))
    capability_manifest = forms.CharField(label=_("Capability manifest"), required=False, strip=False,
                                          widget=MANIFEST_WIDGET)


class ManifestForm(forms.Form):
    capability_manifest = forms.CharField(label=_("Capability manifest"), strip=False, widget=MANIFEST_WIDGET)
    expected_version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    previewed_hash = forms.CharField(required=False, widget=forms.HiddenInput)
    # Shown only for an agent with an identity key (SPEC §9.1): the owner signs offline.
    capability_manifest_signature = forms.CharField(
        label=_("Publisher signature"), required=False, max_length=2048,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "autocomplete": "off",
                                     "placeholder": "eyJhbGciOiJFZERTQSIs…..…"}))
    # SPEC §5.2 (v1.2): kept with the new version, shown to users asked to re-consent.
    change_note = forms.CharField(label=_("Note to your users"), required=False, max_length=CHANGE_NOTE_MAX,
                                  widget=forms.Textarea(attrs={"rows": 3}))


class AgentSettingsForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=100)
    description = forms.CharField(label=_("Description"), max_length=2000, required=False,
                                  widget=forms.Textarea(attrs={"rows": 4}))


class WebhookForm(forms.Form):
    webhook_url = forms.URLField(label=_("Webhook URL"), max_length=500, required=False, assume_scheme="https",
                                 widget=forms.URLInput(attrs={"placeholder": "https://agent.example.com/hashee"}))


class OnceForm(forms.Form):
    """A form that creates a secret, sent at most once (portal.common.form_token_spend)."""

    form_token = forms.CharField(required=False, widget=forms.HiddenInput)


class KeyCreateForm(OnceForm):
    name = forms.CharField(label=_("Label"), max_length=100, required=False,
                           widget=forms.TextInput(attrs={"placeholder": _("e.g. production runtime")}))

