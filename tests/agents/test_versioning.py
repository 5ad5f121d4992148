"""Gapless versions: every path that saves an agent records a version the same way,
and what bypasses signals is pinned."""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import pytest
from django.core import serializers
from django.core.management import call_command
from django.db import transaction

from agents import services
from agents.models import Agent, ManifestVersion
from hashee.errors import HasheeError

pytestmark = pytest.mark.django_db


def bumped(manifest: dict[str, Any], version: str) -> dict[str, Any]:
    changed = copy.deepcopy(manifest)
    changed["agent_version"] = version
    return changed


def test_a_shell_save_records_a_version_like_the_api(alice: Any, manifest: dict) -> None:
    agent = Agent.objects.create(owner=alice, name="Shell", capability_manifest=manifest)
    agent.capability_manifest = bumped(manifest, "1.1.0")
    agent.save()

    versions = list(ManifestVersion.objects.filter(agent=agent).order_by("version"))
    assert [v.version for v in versions] == [1, 2]
    assert [c["rule"] for c in versions[1].changes] == ["AGENT_VERSION_CHANGED"]
    agent.refresh_from_db()
    assert agent.capability_manifest_version == 2 and agent.capability_manifest_hash == versions[1].hash


def test_saving_twice_without_a_change_records_one_version(alice: Any, manifest: dict) -> None:
    agent = Agent.objects.create(owner=alice, name="Twice", capability_manifest=manifest)
    agent.save()
    agent.save()

    assert ManifestVersion.objects.filter(agent=agent).count() == 1


def test_an_invalid_manifest_saved_from_the_shell_rolls_the_save_back(alice: Any, manifest: dict) -> None:
    agent = Agent.objects.create(owner=alice, name="Strict", capability_manifest=manifest)
    agent.capability_manifest = {"schema_version": "9"}
    agent.name = "Renamed"

    with pytest.raises(HasheeError) as caught:
        agent.save()

    assert caught.value.code == "MANIFEST_INVALID"
    agent.refresh_from_db()
    assert agent.name == "Strict" and agent.capability_manifest == manifest


def test_a_rolled_back_change_leaves_no_version_and_no_gap(alice: Any, manifest: dict) -> None:
    agent, _, _ = services.agent_create(owner=alice, name="Gapless", capability_manifest=manifest)

    with pytest.raises(RuntimeError), transaction.atomic():
        services.agent_update(agent_id=agent.pk, actor=alice, capability_manifest=bumped(manifest, "2.0.0"))
        raise RuntimeError("fails after the version row was written")
    _, update, _ = services.agent_update(agent_id=agent.pk, actor=alice, capability_manifest=bumped(manifest, "3.0.0"))

    assert update is not None and update.version == 2
    assert list(ManifestVersion.objects.filter(agent=agent).values_list("version", flat=True)) == [2, 1]


def test_queryset_update_bypasses_the_signal(alice: Any, manifest: dict) -> None:
    agent, _, _ = services.agent_create(owner=alice, name="Bypass", capability_manifest=manifest)

    Agent.objects.filter(pk=agent.pk).update(capability_manifest=bumped(manifest, "9.9.9"))

    assert ManifestVersion.objects.filter(agent=agent).count() == 1


def test_bulk_create_bypasses_the_signal(alice: Any, manifest: dict) -> None:
    Agent.objects.bulk_create([Agent(owner=alice, name="Bulk", capability_manifest=manifest)])

    assert ManifestVersion.objects.count() == 0


def test_loaddata_restores_rows_without_recording_versions(alice: Any, manifest: dict, tmp_path: Any) -> None:
    agent, _, _ = services.agent_create(owner=alice, name="Fixture", capability_manifest=manifest)
    dump = serializers.serialize("json", [agent, *agent.versions.all()])
    ManifestVersion.objects.all().delete()
    Agent.objects.all().delete()
    fixture = tmp_path / "agents.json"
    fixture.write_text(dump)

    call_command("loaddata", str(fixture), stdout=io.StringIO())

    restored = Agent.objects.get(name="Fixture")
    assert restored.capability_manifest_version == 1
    assert list(restored.versions.values_list("version", flat=True)) == [1]
    assert json.loads(dump)[0]["fields"]["capability_manifest"] == manifest


def test_versions_record_who_made_them(alice: Any, manifest: dict) -> None:
    agent, _, _ = services.agent_create(owner=alice, name="Who", capability_manifest=manifest)

    assert agent.versions.get().created_by == alice
