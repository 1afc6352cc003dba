{#-
  materialized='materialized_view': the model is one of the engine's materialized views.

  `dbt run` asks the engine what CREATE OR REPLACE of the model would do (EXPLAIN CREATE's `deploy`
  row, decided as `mv deploy` decides it) and then:
    create              -> CREATE MATERIALIZED VIEW (its first refresh is full)
    replace: <fields>   -> CREATE OR REPLACE MATERIALIZED VIEW (the model's SQL or config changed)
    unchanged           -> REFRESH MATERIALIZED VIEW, or REFRESH ... FULL under --full-refresh
  The statement's outcome is the model's adapter_response: code CREATE / REPLACE / REFRESH, and a
  message with the technique, the reason and the counts, e.g.
    "REFRESH incremental CHANGES_ONLY: rows_read=3 rows_inserted=1 rows_updated=1 rows_deleted=0 late_rows=0"
  An engine error (MV_...) fails the model with its class and hint, and changes nothing.

  It is the materialization of dbt's adapter `mv` (dbt/adapters/mv), so it wins over dbt's own
  `materialized_view` without a macro in the project.
-#}
{% materialization materialized_view, adapter='mv' %}
  {%- set target_relation = this.incorporate(type='materialized_view') -%}
  {{ run_hooks(pre_hooks) }}

  {%- set action = mv_deploy_action(mv_create_statement(target_relation, sql)) -%}
  {%- if action == 'create' or action.startswith('replace') -%}
    {%- set statement_text = mv_create_statement(target_relation, sql, or_replace=action != 'create') -%}
  {%- else -%}
    {%- set statement_text = 'REFRESH MATERIALIZED VIEW ' ~ target_relation ~ (' FULL' if should_full_refresh() else '') -%}
  {%- endif -%}

  {%- call statement('main', fetch_result=True) -%}
    {{ statement_text }}
  {%- endcall -%}
  {%- do mv_store_response(action, load_result('main')) -%}

  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}


{#- EXPLAIN CREATE's `deploy` row: create, unchanged, or "replace: " and the fields that differ. -#}
{% macro mv_deploy_action(create_statement) -%}
  {%- set rows = run_query('EXPLAIN ' ~ create_statement) -%}
  {%- for row in rows if row[0] == 'deploy' -%}
    {{ return(row[1]) }}
  {%- endfor -%}
  {{ exceptions.raise_compiler_error("materialized_view: EXPLAIN CREATE gave no deploy row; is the mv engine's extension older than this adapter?") }}
{%- endmacro %}


{#- The statement's outcome as the model's adapter_response (run_results.json) and dbt's log line. -#}
{% macro mv_store_response(action, result) -%}
  {%- set row = result['data'][0] -%}
  {%- if action == 'create' or action.startswith('replace') -%}
    {%- set code = 'CREATE' if action == 'create' else 'REPLACE' -%}
    {%- set message = code ~ ' ' ~ row[0] ~ (' (' ~ action[9:] ~ ' changed)' if code == 'REPLACE' else '') -%}
    {%- set rows = modules.re.search(': (\\d+) rows$', row[0]) -%}
    {%- do store_raw_result('main', message=message, code=code, rows_affected=(rows.group(1) | int) if rows else none) -%}
  {%- else -%}
    {%- set names = result['table'].column_names -%}
    {%- set counts = [] -%}
    {%- for name in ['rows_read', 'rows_inserted', 'rows_updated', 'rows_deleted', 'late_rows', 'refresh_id'] -%}
      {%- do counts.append(name ~ '=' ~ (row[names.index(name)] | int if row[names.index(name)] is not none else 'null')) -%}
    {%- endfor -%}
    {%- set changed = (row[names.index('rows_inserted')] or 0) + (row[names.index('rows_updated')] or 0)
                      + (row[names.index('rows_deleted')] or 0) -%}
    {%- set message = 'REFRESH ' ~ row[names.index('technique')] ~ ' ' ~ row[names.index('reason')] ~ ': ' ~ counts | join(' ') -%}
    {%- do store_raw_result('main', message=message, code='REFRESH', rows_affected=changed | int) -%}
  {%- endif -%}
{%- endmacro %}
