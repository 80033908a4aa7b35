"""Flow control: concurrency keys, rate slots and cancel requests (the columns and tables;
0003 builds the indexes without blocking writes).

Every column is nullable or has a constant default, and no constraint checks the existing
rows: on PostgreSQL and MariaDB adding them changes no row of a large job table.
"""

import datetime
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_dbjobs', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='ConcurrencyKey',
            fields=[
                ('key', models.CharField(max_length=200, primary_key=True, serialize=False, verbose_name='concurrency key')),
            ],
            options={
                'verbose_name': 'concurrency key',
                'verbose_name_plural': 'concurrency keys',
            },
        ),
        migrations.CreateModel(
            name='RateSlot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('queue', models.CharField(max_length=100, verbose_name='queue')),
                ('number', models.PositiveSmallIntegerField(verbose_name='slot')),
                ('used_at', models.DateTimeField(default=datetime.datetime(2000, 1, 1, 0, 0, tzinfo=datetime.timezone.utc), verbose_name='last used at')),
            ],
            options={
                'verbose_name': 'rate slot',
                'verbose_name_plural': 'rate slots',
            },
        ),
        migrations.AddField(
            model_name='job',
            name='blocked',
            field=models.CharField(blank=True, choices=[('', 'No'), ('CONCURRENCY', 'Waiting for a concurrency slot'), ('RATE', 'In a rate-limited queue: claimed within its rate'), ('DONE', 'Finished: holds no concurrency slot')], db_default='', default='', editable=False, help_text='Why a ready job is not claimed yet.', max_length=12, verbose_name='blocked'),
        ),
        migrations.AddField(
            model_name='job',
            name='cancel_requested_at',
            field=models.DateTimeField(blank=True, editable=False, help_text='Set when a running job is asked to stop; its worker interrupts it.', null=True, verbose_name='cancel requested at'),
        ),
        migrations.AddField(
            model_name='job',
            name='concurrency_key',
            field=models.CharField(blank=True, editable=False, help_text='At most concurrency limit jobs with this key run at once.', max_length=200, null=True, verbose_name='concurrency key'),
        ),
        migrations.AddField(
            model_name='job',
            name='concurrency_limit',
            field=models.PositiveSmallIntegerField(blank=True, editable=False, null=True, verbose_name='concurrency limit'),
        ),
        migrations.AddConstraint(
            model_name='rateslot',
            constraint=models.UniqueConstraint(fields=('queue', 'number'), name='dbjobs_rateslot_one_per_number'),
        ),
    ]
