"""Client-sent JSON columns become ``WireJSONField``: the same column on every database.

Only the model state changes (the field stores what jsonb refuses inside a wrapper, in the
same column type), so no table is rebuilt.
"""

import mcp_app.fields
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_app", "0004_security"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name="deliverymessage",
                    name="message",
                    field=mcp_app.fields.WireJSONField(),
                ),
                migrations.AlterField(
                    model_name="session",
                    name="capabilities",
                    field=mcp_app.fields.WireJSONField(blank=True, default=dict),
                ),
                migrations.AlterField(
                    model_name="session",
                    name="client_info",
                    field=mcp_app.fields.WireJSONField(blank=True, default=dict),
                ),
                migrations.AlterField(
                    model_name="session",
                    name="subscriptions",
                    field=mcp_app.fields.WireJSONField(blank=True, default=list),
                ),
                migrations.AlterField(
                    model_name="streamevent",
                    name="message",
                    field=mcp_app.fields.WireJSONField(),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="arguments",
                    field=mcp_app.fields.WireJSONField(
                        blank=True,
                        help_text="Kept only with MCP_APP['AUDIT_ARGUMENTS'] = True.",
                        null=True,
                    ),
                ),
            ],
        ),
    ]
