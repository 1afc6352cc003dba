{#-
  dbt-spark's drop and rename, with the engine's views (relation type 'materialized_view') among
  the relations: dbt-spark would write `drop materialized_view ...`. DROP MATERIALIZED VIEW drops
  the view with its __late and __open tables; the engine has no rename of a view, so a rename fails
  the model with that said, changing nothing.
-#}
{% macro mv__drop_relation(relation) -%}
  {%- if relation.type == 'materialized_view' -%}
    {%- call statement('drop_relation', auto_begin=False) -%}
      DROP MATERIALIZED VIEW IF EXISTS {{ relation }}
    {%- endcall -%}
  {%- else -%}
    {{ spark__drop_relation(relation) }}
  {%- endif -%}
{%- endmacro %}


{% macro mv__rename_relation(from_relation, to_relation) -%}
  {%- if from_relation.type == 'materialized_view' -%}
    {{ exceptions.raise_compiler_error("materialized view " ~ from_relation ~ " cannot be renamed to " ~ to_relation
                                       ~ ": the mv engine has no rename; drop it and let dbt run create it") }}
  {%- else -%}
    {{ spark__rename_relation(from_relation, to_relation) }}
  {%- endif -%}
{%- endmacro %}
