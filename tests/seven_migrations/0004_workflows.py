"""Workflows: the batch and job-dependency tables, and a job's batch, dependency count and flag.

The new columns are nullable or have a constant default: no row is rewritten. The index
of the jobs of each batch is built by 0005, without blocking writes on PostgreSQL.
"""

import django.db.models.deletion
import django.db.models.functions.datetime
import django_dbjobs.models.ids
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_dbjobs', '0003_flow_control_indexes'),
    ]

    operations = [
        migrations.CreateModel(
            name='JobDependency',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('upstream', models.CharField(db_index=True, max_length=36, verbose_name='waits for')),
                ('run_on_failure', models.BooleanField(default=False, verbose_name='runs if it fails')),
                ('counted', models.BooleanField(default=False, verbose_name='counted')),
            ],
            options={
                'verbose_name': 'job dependency',
                'verbose_name_plural': 'job dependencies',
            },
        ),
        migrations.AddField(
            model_name='job',
            name='has_dependents',
            field=models.BooleanField(db_default=False, default=False, editable=False, help_text='Other jobs wait for this one.', verbose_name='has dependents'),
        ),
        migrations.AddField(
            model_name='job',
            name='waiting_for',
            field=models.PositiveIntegerField(blank=True, editable=False, help_text='How many of the jobs this one waits for have not finished yet.', null=True, verbose_name='waiting for'),
        ),
        migrations.AlterField(
            model_name='job',
            name='blocked',
            field=models.CharField(blank=True, choices=[('', 'No'), ('CONCURRENCY', 'Waiting for a concurrency slot'), ('RATE', 'In a rate-limited queue: claimed within its rate'), ('DONE', 'Finished: holds no concurrency slot'), ('AFTER', 'Waiting for other jobs to finish')], db_default='', default='', editable=False, help_text='Why a ready job is not claimed yet.', max_length=12, verbose_name='blocked'),
        ),
        migrations.CreateModel(
            name='Batch',
            fields=[
                ('id', models.CharField(default=django_dbjobs.models.ids.new_id, editable=False, max_length=36, primary_key=True, serialize=False, verbose_name='id')),
                ('description', models.CharField(blank=True, default='', max_length=255, verbose_name='description')),
                ('total', models.PositiveIntegerField(default=0, verbose_name='jobs')),
                ('succeeded', models.PositiveIntegerField(default=0, verbose_name='succeeded')),
                ('failed', models.PositiveIntegerField(default=0, help_text='Dead-lettered or cancelled jobs of the batch.', verbose_name='failed')),
                ('on_success', models.CharField(blank=True, db_index=True, max_length=36, null=True, verbose_name='on success')),
                ('on_failure', models.CharField(blank=True, db_index=True, max_length=36, null=True, verbose_name='on failure')),
                ('on_complete', models.CharField(blank=True, db_index=True, max_length=36, null=True, verbose_name='on complete')),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='created at')),
                ('finished_at', models.DateTimeField(blank=True, null=True, verbose_name='finished at')),
            ],
            options={
                'verbose_name': 'batch',
                'verbose_name_plural': 'batches',
                'ordering': ['-created_at', 'id'],
                'indexes': [models.Index(fields=['finished_at', 'id'], name='dbjobs_batch_finished_idx')],
            },
        ),
        migrations.AddField(
            model_name='job',
            name='batch',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, editable=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='jobs', to='django_dbjobs.batch', verbose_name='batch'),
        ),
        migrations.AddField(
            model_name='jobdependency',
            name='job',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='dependencies', to='django_dbjobs.job', verbose_name='job'),
        ),
        migrations.AddConstraint(
            model_name='jobdependency',
            constraint=models.UniqueConstraint(fields=('job', 'upstream'), name='dbjobs_dependency_once'),
        ),
    ]
