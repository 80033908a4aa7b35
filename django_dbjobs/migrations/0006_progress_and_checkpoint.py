"""A job's progress and checkpoint (current_job().progress(), .checkpoint()): two nullable
columns, no table rewrite on PostgreSQL and an instant ADD COLUMN on MariaDB."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_dbjobs', '0005_job_table_autovacuum'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='checkpoint_state',
            field=models.JSONField(blank=True, default=None, editable=False, help_text='The state the job last stored with current_job().checkpoint(); a later run of it carries on from there (current_job().resume).', null=True, verbose_name='checkpoint'),
        ),
        migrations.AddField(
            model_name='job',
            name='progress_state',
            field=models.JSONField(blank=True, default=None, editable=False, help_text='What the job last reported with current_job().progress(): done, total, note, rate; kept after it ends.', null=True, verbose_name='progress'),
        ),
    ]
