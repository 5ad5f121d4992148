"""AccessToken moves from the project package to this app: state only, the table
(``hashee_accesstoken``) stays as it is."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('hashee', '0006_access_tokens'),
        ('agents', '0005_identity_keys_and_manifest_signatures'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='AccessToken',
                fields=[
                    ('id', models.BigAutoField(primary_key=True, serialize=False)),
                    ('prefix', models.CharField(db_index=True, editable=False, max_length=16)),
                    ('token_hash', models.CharField(editable=False, max_length=64)),
                    ('scopes', models.CharField(help_text='Space-separated, as OAuth writes them.', max_length=200)),
                    ('created_at', models.DateTimeField()),
                    ('expires_at', models.DateTimeField(db_index=True)),
                    ('key', models.ForeignKey(help_text='The agent key exchanged for this token.', on_delete=django.db.models.deletion.CASCADE, related_name='access_tokens', to='agents.apikey')),
                ],
                options={
                    'db_table': 'hashee_accesstoken',
                    'ordering': ['-created_at'],
                },
            ),
        ]),
    ]
