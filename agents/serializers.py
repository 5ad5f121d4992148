"""Small input/output serializers of the agents API (one per shape)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agents.models import CHANGE_NOTE_MAX, Agent, ManifestVersion
from hashee_sdk.core.diff_support import Rule
from hashee_sdk.core.manifest_rules import SENSITIVITY_LEVELS

# A detached EdDSA JWS is ~200 characters; this leaves room for a long kid, refuses junk.
SIGNATURE_MAX_LENGTH = 2048


class AgentCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    capability_manifest = serializers.JSONField(required=False, allow_null=True, default=None)
    capability_manifest_signature = serializers.CharField(required=False, allow_null=True, default=None,
                                                          max_length=SIGNATURE_MAX_LENGTH)
    webhook_url = serializers.URLField(max_length=500, required=False, allow_blank=True, default="")


class AgentUpdateInput(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False)
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    capability_manifest = serializers.JSONField(required=False)
    capability_manifest_signature = serializers.CharField(required=False, allow_null=True,
                                                          max_length=SIGNATURE_MAX_LENGTH)
    webhook_url = serializers.URLField(max_length=500, required=False, allow_blank=True)
    expected_version = serializers.IntegerField(required=False, min_value=0)
    change_note = serializers.CharField(max_length=CHANGE_NOTE_MAX, required=False, allow_null=True, allow_blank=True,
                                        help_text="A note to users about the new version (plain text), kept with it "
                                                  "and shown on the re-consent page; never part of the manifest.")


class AgentOutput(serializers.ModelSerializer):
    agent_id = serializers.UUIDField(source="id", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    capability_manifest_hash = serializers.SerializerMethodField()
    highest_sensitivity = serializers.SerializerMethodField()

    class Meta:
        model = Agent
        fields = [
            "agent_id", "name", "description", "owner", "status", "capability_manifest",
            "capability_manifest_version", "capability_manifest_hash", "capability_manifest_signature",
            "publisher_verified", "manifest_size_bytes",
            "tool_count", "scope_count", "highest_sensitivity", "created_at", "updated_at",
        ]

    def get_capability_manifest_hash(self, agent: Agent) -> str | None:
        return agent.capability_manifest_hash or None

    def get_highest_sensitivity(self, agent: Agent) -> str | None:
        return SENSITIVITY_LEVELS[agent.max_sensitivity] if agent.max_sensitivity is not None else None


class OwnerAgentOutput(AgentOutput):
    """What the owner sees on top of the public view."""

    manifest_warnings = serializers.SerializerMethodField()

    class Meta(AgentOutput.Meta):
        fields = [*AgentOutput.Meta.fields, "webhook_url", "manifest_warnings"]

    def get_manifest_warnings(self, agent: Agent) -> list[dict[str, Any]]:
        latest = agent.versions.order_by("-version").first()
        return latest.warnings if latest else []


class ChangeRecordOutput(serializers.Serializer):
    """One change record of the diff engine (SPEC §4)."""

    rule = serializers.ChoiceField(choices=[rule.value for rule in Rule], help_text="A rule of SPEC §4.")
    path = serializers.CharField(help_text="JSON pointer into the manifest (tools and scopes by name/id).")
    tool = serializers.CharField(required=False, help_text="The tool the change is in, if any.")
    scope = serializers.CharField(required=False, help_text="The permission scope concerned, if any.")
    before = serializers.JSONField(required=False, allow_null=True, help_text="The old value (any JSON).")
    after = serializers.JSONField(required=False, allow_null=True, help_text="The new value (any JSON).")
    breaking = serializers.BooleanField(help_text="The user must be asked again.")
    example = serializers.JSONField(required=False, help_text=(
        "For a narrowing: an argument object the old input schema accepted and the new one rejects."))


class IssueOutput(serializers.Serializer):
    """A validation error or warning: where, which stable code, and what to do."""

    path = serializers.CharField(help_text="JSON pointer into the manifest.")
    code = serializers.CharField(help_text="A validation detail or warning code (see the error registry).")
    message = serializers.CharField()


class ManifestUpdateOutput(serializers.Serializer):
    agent_id = serializers.UUIDField()
    capability_manifest_version = serializers.IntegerField()
    capability_manifest_hash = serializers.CharField(allow_null=True)
    breaking_changes = ChangeRecordOutput(many=True)
    changes = ChangeRecordOutput(many=True)
    warnings = IssueOutput(many=True)
    scopes_requiring_reauth = serializers.ListField(child=serializers.CharField())
    capability_manifest_signature = serializers.CharField(allow_null=True)
    publisher_verified = serializers.BooleanField()
    signature_required = serializers.BooleanField(required=False, help_text="dry runs: saving needs a signature")
    dry_run = serializers.BooleanField(required=False)
    webhook_secret = serializers.CharField(required=False)


class ManifestDiffOutput(serializers.Serializer):
    agent_id = serializers.UUIDField()
    # "from" is a keyword: declared below through the fields mapping.
    to = serializers.IntegerField(help_text="The newer version.")
    from_hash = serializers.CharField()
    to_hash = serializers.CharField()
    breaking = serializers.BooleanField()
    breaking_changes = ChangeRecordOutput(many=True)
    changes = ChangeRecordOutput(many=True)
    scopes_requiring_reauth = serializers.ListField(child=serializers.CharField())

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        return {"agent_id": fields.pop("agent_id"), "from": serializers.IntegerField(help_text="The older version."),
                **fields}


class WebhookSecretOutput(serializers.Serializer):
    webhook_secret = serializers.CharField(help_text="The new `whsec_` secret, shown only here.")
    previous_secret_expires_at = serializers.DateTimeField(
        source="webhook_secret_previous_expires_at",
        help_text="Until then deliveries carry the old secret's signature too; then it is forgotten.")


class VersionSummaryOutput(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None, read_only=True)
    capability_manifest_signature = serializers.CharField(source="signature", allow_null=True, read_only=True)
    publisher_verified = serializers.BooleanField(read_only=True)

    class Meta:
        model = ManifestVersion
        fields = ["version", "hash", "size_bytes", "breaking", "scopes_requiring_reauth", "warnings",
                  "capability_manifest_signature", "publisher_verified", "change_note", "created_by", "created_at"]


class VersionOutput(VersionSummaryOutput):
    changes = ChangeRecordOutput(many=True, read_only=True)
    breaking_changes = ChangeRecordOutput(many=True, read_only=True)

    class Meta(VersionSummaryOutput.Meta):
        fields = [*VersionSummaryOutput.Meta.fields, "manifest", "changes", "breaking_changes"]


class ValidateOutput(serializers.Serializer):
    valid = serializers.BooleanField()
    errors = IssueOutput(many=True)  # type: ignore[assignment]  # a declared field, not Serializer.errors: the metaclass moves it
    warnings = IssueOutput(many=True)
    size_bytes = serializers.IntegerField(allow_null=True)
    hash = serializers.CharField(allow_null=True)
