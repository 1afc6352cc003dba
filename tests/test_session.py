"""mv.session() is an embedded local Spark with Delta and the window functions; mv.configure() adds
the same to a user's own builder without dropping what it already has."""
import os
import zipfile
from pathlib import Path

import pyspark
import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

import mv
from mv import config, jars
from mv.errors import MvError


def test_session_has_delta_the_extension_and_a_local_warehouse(spark):
    conf = spark.sparkContext.getConf()
    assert jars.EXTENSION_CLASS in conf.get("spark.sql.extensions")
    assert "io.delta.sql.DeltaSparkSessionExtension" in conf.get("spark.sql.extensions")
    assert spark.conf.get("spark.sql.catalog.spark_catalog").endswith("DeltaCatalog")
    warehouse = spark.conf.get("spark.sql.warehouse.dir")
    assert warehouse.replace("file:", "").startswith(os.environ["MV_HOME"])
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


def test_delta_tables_with_change_data_feed_work_out_of_the_box(spark):
    spark.sql("CREATE OR REPLACE TABLE session_cdf (id INT) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql("INSERT INTO session_cdf VALUES (1), (2)")
    spark.sql("DELETE FROM session_cdf WHERE id = 1")
    changes = spark.sql("SELECT id, _change_type FROM table_changes('session_cdf', 1)").collect()
    assert sorted(tuple(r) for r in changes) == [(1, "delete"), (1, "insert"), (2, "insert")]
    spark.sql("DROP TABLE session_cdf")


def test_session_returns_the_running_session(spark):
    assert mv.session() is spark


def test_configure_keeps_the_builders_own_jars_and_extensions():
    builder = SparkSession.Builder()
    builder.config("spark.jars", "/opt/mine.jar").config("spark.sql.extensions", "com.example.Ext")
    options = mv.configure(builder)._options
    assert options["spark.jars"].startswith("/opt/mine.jar,")
    assert str(jars.extension_jar()) in options["spark.jars"]
    assert options["spark.sql.extensions"].split(",") == [
        "com.example.Ext", "io.delta.sql.DeltaSparkSessionExtension", jars.EXTENSION_CLASS]


def test_conf_values_name_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("MV_HOME", str(tmp_path))
    defaults = config.spark_defaults()
    assert defaults["spark.sql.warehouse.dir"] == f"{tmp_path}/warehouse"
    assert f"databaseName={tmp_path}/metastore_db" in defaults["spark.hadoop.javax.jdo.option.ConnectionURL"]


def test_mv_conf_dir_points_at_another_conf_folder(monkeypatch, tmp_path):
    (tmp_path / "spark-defaults.conf").write_text("# mine\nspark.master   local[1]\n")
    monkeypatch.setenv("MV_CONF_DIR", str(tmp_path))
    assert config.spark_defaults() == {"spark.master": "local[1]"}
    assert config.home_dir() == Path(os.environ["MV_HOME"]).resolve()


def test_extension_jar_name_changes_with_its_sources(monkeypatch, tmp_path):
    before = jars.extension_jar_path()
    sources = tmp_path / "jvm"
    sources.mkdir()
    for source in jars.JVM_SOURCES.glob("*.scala"):
        (sources / source.name).write_text(source.read_text())
    monkeypatch.setattr(jars, "JVM_SOURCES", sources)
    assert jars.extension_jar_path() == before
    (sources / "Extra.scala").write_text("package io.mvengine\nobject Extra\n")
    assert jars.extension_jar_path() != before


@pytest.mark.compat
def test_the_delta_jar_is_the_one_built_for_the_running_spark_line():
    line = ".".join(pyspark.__version__.split(".")[:2])
    assert jars.delta_coordinates()[0] == f"io.delta:delta-spark_{line}_2.13:4.4.0"
    assert [jars.spark_line(v) for v in ("4.0.1", "4.1.4", "4.2.0")] == ["4.0", "4.1", "4.2"]


@pytest.mark.parametrize("version", ["4.3.0", "3.5.6", "5.0.0"])
def test_a_spark_no_delta_supports_stops_at_session_start_naming_the_supported_lines(monkeypatch, version):
    monkeypatch.setattr(pyspark, "__version__", version)
    with pytest.raises(MvError) as raised:
        mv.configure(SparkSession.Builder())  # what mv.session() and the Connect server start with
    assert raised.value.error_class == "MV_SPARK_VERSION_UNSUPPORTED"
    assert raised.value.params == {"version": version, "supported": "4.0,4.1,4.2"}


def test_setup_on_an_unsupported_spark_prints_one_error_line_and_exits_1(monkeypatch, capsys):
    monkeypatch.setattr(pyspark, "__version__", "4.3.0")
    assert jars.main() == 1
    err = capsys.readouterr().err
    assert err.startswith("error [MV_SPARK_VERSION_UNSUPPORTED]") and err.count("\n") == 1


@pytest.mark.compat
def test_the_extension_knows_the_spark_line_it_was_built_for_and_refuses_another(spark):
    with zipfile.ZipFile(jars.extension_jar()) as built:
        assert built.read(jars.SPARK_LINE_RESOURCE).decode() == jars.spark_line()
    compat = spark._jvm.io.mvengine.SparkCompat
    compat.requireLine(compat.builtLine())  # what every session of this Spark passed at its start
    with pytest.raises(AnalysisException) as raised:
        compat.requireLine(spark._jvm.scala.Some("3.5"))
    assert raised.value.getCondition() == "MV_SPARK_VERSION_UNSUPPORTED"
