# Queues (paused ones have a row), and the admin's proxies: dead letters and the overview.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_dbjobs', '0005_schedules'),
    ]

    operations = [
        migrations.CreateModel(
            name='Queue',
            fields=[
                ('name', models.CharField(max_length=100, primary_key=True, serialize=False, verbose_name='name')),
                ('paused_at', models.DateTimeField(blank=True, help_text='Empty: workers claim from this queue.', null=True, verbose_name='paused at')),
                ('paused_by', models.CharField(blank=True, default='', max_length=150, verbose_name='paused by')),
            ],
            options={
                'verbose_name': 'queue',
                'verbose_name_plural': 'queues',
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='FailedJob',
            fields=[
            ],
            options={
                'verbose_name': 'dead letter',
                'verbose_name_plural': 'dead letters',
                'proxy': True,
                'indexes': [],
                'constraints': [],
            },
            bases=('django_dbjobs.job',),
        ),
        migrations.CreateModel(
            name='Overview',
            fields=[
            ],
            options={
                'verbose_name': 'overview',
                'verbose_name_plural': 'overview',
                'proxy': True,
                'default_permissions': (),
                'indexes': [],
                'constraints': [],
            },
            bases=('django_dbjobs.job',),
        ),
    ]
