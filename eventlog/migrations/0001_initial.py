"""The event log's models move here from the project package: state only, the tables
(``hashee_event`` …) stay as they are. A new database gets them from ``hashee``'s migrations."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('hashee', '0006_access_tokens'),
        ('agents', '0006_access_token_moved_here'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='EventLogState',
                fields=[
                    ('id', models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
                    ('purged_through_id', models.BigIntegerField(default=0)),
                ],
                options={
                    'verbose_name': 'event log state',
                    'db_table': 'hashee_eventlogstate',
                },
            ),
            migrations.CreateModel(
                name='WebhookWorkerHeartbeat',
                fields=[
                    ('id', models.PositiveSmallIntegerField(default=1, editable=False, primary_key=True, serialize=False)),
                    ('seen_at', models.DateTimeField()),
                ],
                options={
                    'db_table': 'hashee_webhookworkerheartbeat',
                },
            ),
            migrations.CreateModel(
                name='WebhookDelivery',
                fields=[
                    ('id', models.BigAutoField(primary_key=True, serialize=False)),
                    ('event_id', models.BigIntegerField(blank=True, help_text='The persisted event, for tracing.', null=True)),
                    ('event_type', models.CharField(max_length=64)),
                    ('payload', models.JSONField(help_text='The body sent: {type, timestamp, data}.')),
                    ('msg_id', models.CharField(editable=False, help_text='webhook-id: the same on every retry, so receivers can de-duplicate.', max_length=64, unique=True)),
                    ('status', models.CharField(choices=[('pending', 'Pending'), ('delivered', 'Delivered'), ('failed', 'Failed')], default='pending', max_length=16)),
                    ('attempt_count', models.PositiveIntegerField(default=0)),
                    ('next_attempt_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                    ('last_status_code', models.PositiveSmallIntegerField(blank=True, null=True)),
                    ('last_error', models.CharField(blank=True, max_length=500)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('delivered_at', models.DateTimeField(blank=True, null=True)),
                    ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='webhook_deliveries', to='agents.agent')),
                ],
                options={
                    'verbose_name_plural': 'webhook deliveries',
                    'db_table': 'hashee_webhookdelivery',
                    'ordering': ['-id'],
                },
            ),
            migrations.CreateModel(
                name='WebhookAttempt',
                fields=[
                    ('id', models.BigAutoField(primary_key=True, serialize=False)),
                    ('attempted_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('url', models.CharField(blank=True, max_length=500)),
                    ('status_code', models.PositiveSmallIntegerField(blank=True, null=True)),
                    ('duration_ms', models.PositiveIntegerField(default=0)),
                    ('error', models.CharField(blank=True, max_length=500)),
                    ('response_excerpt', models.CharField(blank=True, max_length=500)),
                    ('delivery', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='attempts', to='eventlog.webhookdelivery')),
                ],
                options={
                    'db_table': 'hashee_webhookattempt',
                    'ordering': ['id'],
                },
            ),
            migrations.CreateModel(
                name='Event',
                fields=[
                    ('id', models.BigAutoField(primary_key=True, serialize=False)),
                    ('type', models.CharField(max_length=64)),
                    ('data', models.JSONField(default=dict)),
                    ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                    ('agent', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='agents.agent')),
                    ('audience', models.ForeignKey(blank=True, db_index=False, help_text='All users with a live relation to this agent.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='agents.agent')),
                    ('user', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                ],
                options={
                    'db_table': 'hashee_event',
                    'ordering': ['id'],
                    'indexes': [models.Index(fields=['user', 'id'], name='hashee_even_user_id_099349_idx'), models.Index(condition=models.Q(('agent__isnull', False)), fields=['agent', 'id'], name='hashee_event_agent_partial'), models.Index(condition=models.Q(('audience__isnull', False)), fields=['audience', 'id'], name='hashee_event_audience_partial')],
                },
            ),
            migrations.AddIndex(
                model_name='webhookdelivery',
                index=models.Index(fields=['status', 'next_attempt_at'], name='hashee_webhook_due'),
            ),
        ]),
    ]
