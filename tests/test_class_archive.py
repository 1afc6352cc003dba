"""A new embedded session maps the classes it needs from the class archive `make setup` made
(mv/class_archive.py) instead of loading them one by one; without an archive (MV_CLASS_ARCHIVE=0,
or none for its conf folder and jars) it starts as before."""
import os
import subprocess
import sys
import textwrap

from mv import class_archive, config, jars


def test_make_setup_made_the_archive_for_this_java_and_these_jars():
    assert class_archive.path().is_file()
    assert class_archive.path().parent == config.cache_dir() / "classes"


def test_a_new_session_maps_its_classes_from_the_archive(tmp_path):
    loaded = _classes_loaded_by_a_new_session(tmp_path)
    from_archive = [line for line in loaded if "source: shared objects file (top)" in line]
    assert len(from_archive) > 5_000, (tmp_path / "cds.log").read_text()[-3000:]  # why the JVM refused it
    assert any("io.delta." in line for line in from_archive)  # Delta's jar too, not only Spark's


def test_the_archive_is_named_for_what_it_must_match(monkeypatch, tmp_path):
    here = class_archive.path()
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert class_archive.path() != here
    assert class_archive.java_options() == ""  # no archive for that conf folder: a plain start


def test_another_virtual_environment_with_the_same_jars_has_an_archive_of_its_own(monkeypatch, tmp_path):
    """The JVM refuses an archive made with another class path: a second checkout's environment
    (CI's clean clone beside a working copy, one cache folder) must not find the first one's."""
    here = class_archive.path()
    for jar in jars.pyspark_jars_dir().glob("*.jar"):  # the same names, sizes and times in another folder
        twin = tmp_path / jar.name
        twin.touch()
        os.truncate(twin, jar.stat().st_size)
        os.utime(twin, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns))
    monkeypatch.setattr(jars, "pyspark_jars_dir", lambda: tmp_path)
    assert class_archive.path() != here


def test_java_options_name_the_archive_and_keep_the_jvm_quiet_about_it(monkeypatch):
    options = class_archive.java_options()
    assert f"-XX:SharedArchiveFile={class_archive.path()}" in options
    assert "-Xshare:auto" in options and "-Xlog:cds=off" in options
    monkeypatch.setenv("MV_CLASS_ARCHIVE", "0")  # a session then starts as if there were none
    assert class_archive.java_options() == ""


def _classes_loaded_by_a_new_session(tmp_path) -> list[str]:
    """The JVM's class-loading log of a session started in a new process by mv.session() (and its
    log of the archive, cds.log, which says why it refused one)."""
    log, cds = tmp_path / "classes.log", tmp_path / "cds.log"
    script = textwrap.dedent(f"""
        import mv
        from mv import config
        java = config.spark_defaults().get("spark.driver.extraJavaOptions", "")
        logs = " -Xlog:class+load=info:file={log} -Xlog:cds=info,cds+dynamic=info:file={cds}"
        spark = mv.session(conf={{"spark.driver.extraJavaOptions": java + logs}})
        assert spark.sql("SELECT 1").first()[0] == 1
    """)
    home = tmp_path / "home"
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300, capture_output=True,
                   env={**os.environ, "MV_HOME": str(home)})
    return log.read_text().splitlines()
