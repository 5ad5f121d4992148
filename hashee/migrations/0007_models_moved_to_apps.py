"""The project package no longer owns models (they moved to ``eventlog`` and ``agents``):
state only, no table is dropped."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0006_access_token_moved_here'),
        ('eventlog', '0001_initial'),
        ('hashee', '0006_access_tokens'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RemoveField(
                model_name='accesstoken',
                name='key',
            ),
            migrations.RemoveField(
                model_name='event',
                name='agent',
            ),
            migrations.RemoveField(
                model_name='event',
                name='audience',
            ),
            migrations.RemoveField(
                model_name='event',
                name='user',
            ),
            migrations.DeleteModel(
                name='EventLogState',
            ),
            migrations.RemoveField(
                model_name='webhookattempt',
                name='delivery',
            ),
            migrations.RemoveField(
                model_name='webhookdelivery',
                name='agent',
            ),
            migrations.DeleteModel(
                name='WebhookWorkerHeartbeat',
            ),
            migrations.DeleteModel(
                name='AccessToken',
            ),
            migrations.DeleteModel(
                name='Event',
            ),
            migrations.DeleteModel(
                name='WebhookAttempt',
            ),
            migrations.DeleteModel(
                name='WebhookDelivery',
            ),
        ]),
    ]
