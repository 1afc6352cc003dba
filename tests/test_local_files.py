"""On one machine, Delta's commits and data files are written without a process per file: the engine's
local file system (mv/jvm/LocalFiles.scala) sets permissions and reads link status by system calls
where Hadoop, without its native library, runs `chmod` and `readlink`; everything else is Hadoop's."""
import os
import stat

import pytest
from py4j.protocol import Py4JJavaError

import mv

FS = "io.mvengine.LocalFiles$FileSystem"
AFS = "io.mvengine.LocalFiles$Fs"


def processes_started(spark, tmp_path, action) -> list[str]:
    """The commands of the processes the driver's JVM starts while `action` runs (Java Flight
    Recorder's jdk.ProcessStart events)."""
    jvm = spark._jvm
    recording = jvm.jdk.jfr.Recording()
    recording.enable("jdk.ProcessStart")
    recording.start()
    try:
        action()
    finally:
        recording.stop()
    path = jvm.java.io.File(str(tmp_path / "processes.jfr")).toPath()
    recording.dump(path)
    recording.close()
    return [str(event.getString("command")) for event in jvm.jdk.jfr.consumer.RecordingFile.readAllEvents(path)]


def test_a_delta_commit_and_a_refresh_start_no_chmod_or_readlink(spark, tmp_path):
    spark.sql("CREATE OR REPLACE TABLE lf_source (k INT, v INT) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql("INSERT INTO lf_source VALUES (1, 10)")
    mv.sql(spark, "CREATE MATERIALIZED VIEW lf_view AS SELECT k, count(*) AS n FROM lf_source GROUP BY k")

    def write():
        spark.sql("INSERT INTO lf_source VALUES (1, 11), (2, 20)")
        mv.sql(spark, "REFRESH MATERIALIZED VIEW lf_view").collect()

    started = processes_started(spark, tmp_path, write)
    assert [c for c in started if c.split()[0] in ("chmod", "readlink")] == []
    assert sorted(tuple(r) for r in spark.table("lf_view").collect()) == [(1, 2), (2, 1)]
    mv.sql(spark, "DROP MATERIALIZED VIEW lf_view")
    spark.sql("DROP TABLE lf_source")


def test_files_get_the_permissions_hadoop_gives_them(spark, tmp_path):
    location = tmp_path / "lf_perms"
    spark.sql(f"CREATE TABLE delta.`{location}` (id INT) USING delta")
    spark.sql(f"INSERT INTO delta.`{location}` VALUES (1)")
    umask = int(spark.sparkContext._jsc.hadoopConfiguration().get("fs.permissions.umask-mode", "022"), 8)
    written = [location / "_delta_log" / "00000000000000000001.json",
               *location.glob("part-*.parquet"), *location.glob(".part-*.parquet.crc")]
    assert len(written) == 3
    assert {stat.S_IMODE(os.stat(f).st_mode) for f in written} == {0o666 & ~umask}


def test_a_rename_onto_an_existing_file_still_fails(spark, tmp_path):
    """Delta's log on local files commits by a rename that must not overwrite (HDFSLogStore)."""
    jvm, conf = spark._jvm, spark.sparkContext._jsc.hadoopConfiguration()
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    files = jvm.org.apache.hadoop.fs.FileContext.getFileContext(conf)
    assert files.getDefaultFileSystem().getClass().getName() == AFS
    no_options = spark.sparkContext._gateway.new_array(getattr(jvm.org.apache.hadoop.fs, "Options$Rename"), 0)
    with pytest.raises(Py4JJavaError, match="FileAlreadyExistsException"):
        files.rename(jvm.org.apache.hadoop.fs.Path(f"file:{tmp_path / 'a'}"),
                     jvm.org.apache.hadoop.fs.Path(f"file:{tmp_path / 'b'}"), no_options)
    assert (tmp_path / "b").read_text() == "b"


def test_only_a_local_master_whose_settings_name_no_local_file_system_gets_them(spark):
    jvm = spark._jvm
    install = jvm.io.mvengine.LocalFiles.installIn

    def conf(**settings):
        """Hadoop's defaults, and `settings` as spark.hadoop.* settings give them."""
        c = jvm.org.apache.hadoop.conf.Configuration()
        for key, value in settings.items():
            c.set(key.replace("_", "."), value, "spark.hadoop")
        return c

    def local_file_systems(c):
        return c.get("fs.file.impl"), c.get("fs.AbstractFileSystem.file.impl")

    assert local_file_systems(spark.sparkContext._jsc.hadoopConfiguration()) == (FS, AFS)
    fresh = conf()
    assert install("local[2]", fresh) is True
    assert local_file_systems(fresh) == (FS, AFS)
    cluster = conf()
    assert install("local-cluster[2,1,1024]", cluster) is False
    assert local_file_systems(cluster) == (None, "org.apache.hadoop.fs.local.LocalFs")
    hadoops = conf(fs_file_impl="org.apache.hadoop.fs.LocalFileSystem")
    assert install("local[*]", hadoops) is False
    assert local_file_systems(hadoops) == ("org.apache.hadoop.fs.LocalFileSystem", "org.apache.hadoop.fs.local.LocalFs")
    hadoops_log = conf(fs_AbstractFileSystem_file_impl="org.apache.hadoop.fs.local.LocalFs")
    assert install("local", hadoops_log) is False
    assert local_file_systems(hadoops_log) == (None, "org.apache.hadoop.fs.local.LocalFs")
