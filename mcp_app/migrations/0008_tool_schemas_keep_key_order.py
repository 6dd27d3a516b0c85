from django.db import migrations

import mcp_app.fields


class Migration(migrations.Migration):
    """Tool schemas keep their key order: the column is the same JSON column on every database
    (only how a value is written to it changes), so nothing is done to the database."""

    dependencies = [
        ("mcp_app", "0007_toolcall_outcome_cancelled"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="tool",
                    name="input_schema",
                    field=mcp_app.fields.OrderedJSONField(
                        blank=True,
                        help_text='A JSON Schema (2020-12) of the arguments, root "type": '
                        '"object". Blank: no arguments (a new tool) or the code tool\'s schema '
                        "(a restyling row).",
                        null=True,
                    ),
                ),
                migrations.AlterField(
                    model_name="tool",
                    name="output_schema",
                    field=mcp_app.fields.OrderedJSONField(
                        blank=True,
                        help_text="A JSON Schema (2020-12) of the structured result, if any.",
                        null=True,
                    ),
                ),
            ],
        ),
    ]
