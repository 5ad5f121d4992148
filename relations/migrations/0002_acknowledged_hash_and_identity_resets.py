from django.db import migrations, models
from django.db.models import OuterRef, Subquery, Value
from django.db.models.functions import Coalesce


def backfill_acknowledged_hash(apps, schema_editor):
    """Each relation acknowledged a version: record that version's hash (one UPDATE)."""
    Relation = apps.get_model("relations", "Relation")
    ManifestVersion = apps.get_model("agents", "ManifestVersion")
    version_hash = ManifestVersion.objects.filter(
        agent_id=OuterRef("agent_id"), version=OuterRef("acknowledged_manifest_version")).values("hash")[:1]
    Relation.objects.update(acknowledged_manifest_hash=Coalesce(Subquery(version_hash), Value("")))


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0005_identity_keys_and_manifest_signatures'),
        ('relations', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='relation',
            name='acknowledged_identity_resets',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='relation',
            name='acknowledged_manifest_hash',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.RunPython(backfill_acknowledged_hash, migrations.RunPython.noop),
    ]
