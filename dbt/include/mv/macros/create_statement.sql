{#-
  The engine's CREATE [OR REPLACE] MATERIALIZED VIEW for a model: its config's clauses, then its SQL.

    {{ config(materialized='materialized_view',
              watermark="ts - INTERVAL '5' MINUTES",     -- WATERMARK FOR ts AS ts - INTERVAL '5' MINUTES
              idle_after="INTERVAL '30' MINUTES", emit='on_window_close', grace="INTERVAL '10' MINUTES",
              refresh_policy='incremental', schedule='EVERY 5 MINUTES',
              partition_by=['day'], tblproperties={'delta.logRetentionDuration': 'interval 7 days'}) }}

  Intervals may also be given as '10 minutes'. Only clauses the config names are written, so the
  engine's defaults (EMIT ON UPDATE, REFRESH POLICY AUTO) stay the stored definition's defaults.
-#}
{% macro mv_create_statement(relation, sql, or_replace=false) -%}
CREATE {% if or_replace %}OR REPLACE {% endif %}MATERIALIZED VIEW {{ relation }}
{%- set watermark = config.get('watermark') %}
{%- if watermark %}
  WATERMARK FOR {{ mv_watermark(watermark) }}
  {%- if config.get('idle_after') %} IDLE AFTER {{ mv_interval(config.get('idle_after')) }}{% endif %}
{%- elif config.get('idle_after') %}
  {{ exceptions.raise_compiler_error("materialized_view: idle_after needs a watermark") }}
{%- endif %}
{%- set emit = config.get('emit') %}
{%- if emit %}
  {%- set emits = {'on_update': 'EMIT ON UPDATE', 'on_window_close': 'EMIT ON WINDOW CLOSE'} %}
  {%- if emit | lower not in emits %}
    {{ exceptions.raise_compiler_error("materialized_view: emit is on_update or on_window_close, not " ~ emit) }}
  {%- endif %}
  {{ emits[emit | lower] }}
{%- endif %}
{%- if config.get('grace') %}
  GRACE {{ mv_interval(config.get('grace')) }}
{%- endif %}
{%- if config.get('refresh_policy') %}
  REFRESH POLICY {{ config.get('refresh_policy') | replace('_', ' ') | upper }}
{%- endif %}
{%- set schedule = config.get('schedule') %}
{%- if schedule %}
  {%- set words = schedule | trim | upper %}
  {% if words.startswith('SCHEDULE') or words.startswith('TRIGGER') %}{{ schedule }}{% else %}SCHEDULE {{ schedule }}{% endif %}
{%- endif %}
{%- if config.get('partition_by') %}
  PARTITIONED BY ({{ mv_columns(config.get('partition_by')) }})
{%- endif %}
{%- if config.get('cluster_by') %}
  CLUSTER BY ({{ mv_columns(config.get('cluster_by')) }})
{%- endif %}
{%- set properties = config.get('tblproperties') %}
{%- if properties %}
  TBLPROPERTIES ({% for key, value in properties.items() %}'{{ key }}' = '{{ value }}'{% if not loop.last %}, {% endif %}{% endfor %})
{%- endif %}
AS
{{ sql }}
{%- endmacro %}


{#- "ts - INTERVAL '5' MINUTES" becomes "ts AS ts - INTERVAL '5' MINUTES"; "ts AS ..." stays as it is. -#}
{% macro mv_watermark(watermark) -%}
  {%- if ' as ' in (' ' ~ watermark | lower ~ ' ') -%}
    {{ watermark }}
  {%- else -%}
    {{ watermark.split()[0].split('-')[0] }} AS {{ watermark }}
  {%- endif -%}
{%- endmacro %}


{#- "INTERVAL '10' MINUTES" stays; "10 minutes" becomes "INTERVAL '10 minutes'". -#}
{% macro mv_interval(value) -%}
  {%- if (value | string | trim | upper).startswith('INTERVAL') -%}{{ value }}{%- else -%}INTERVAL '{{ value }}'{%- endif -%}
{%- endmacro %}


{% macro mv_columns(columns) -%}
  {%- if columns is string -%}{{ columns }}{%- else -%}{{ columns | join(', ') }}{%- endif -%}
{%- endmacro %}
