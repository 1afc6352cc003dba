"""dbt's adapter `mv`: dbt-spark, whose materialized views are this engine's (README.md, "dbt").

A profile with `type: mv` takes dbt-spark's settings (`method: session` or `thrift`, ...):

    my_project:
      target: dev
      outputs:
        dev: {type: mv, method: session, host: NA, schema: analytics}
"""
from dbt.adapters.base import AdapterPlugin

from dbt.adapters.mv.impl import MvAdapter, MvCredentials
from dbt.include import mv

Plugin = AdapterPlugin(adapter=MvAdapter, credentials=MvCredentials, include_path=mv.PACKAGE_PATH,
                       dependencies=["spark"])
