from typing import Any

from django.db import migrations, models


def name_by_profile(apps: Any, schema_editor: Any) -> None:
    """Agents made before names are called by their profile, as agents.services.default_name calls one
    spawned without a prompt."""
    apps.get_model("agents", "Agent").objects.update(name=models.F("profile"))


class Migration(migrations.Migration):
    dependencies = [("agents", "0009_agent_steering")]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="name",
            field=models.CharField(default="", max_length=80),
            preserve_default=False,
        ),
        migrations.RunPython(name_by_profile, migrations.RunPython.noop),
    ]
