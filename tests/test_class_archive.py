"""A new embedded session maps the classes it needs from the class archive `make setup` made
(mv/class_archive.py) instead of loading them one by one; without an archive (MV_CLASS_ARCHIVE=0,
or none for its conf folder and jars) it starts as before."""
import os
import subprocess
import sys
import textwrap

from mv import class_archive, config


def test_make_setup_made_the_archive_for_this_java_and_these_jars():
    assert class_archive.path().is_file()
    assert class_archive.path().parent == config.cache_dir() / "classes"


def test_a_new_session_maps_its_classes_from_the_archive(tmp_path):
    loaded = _classes_loaded_by_a_new_session(tmp_path)
    from_archive = [line for line in loaded if "source: shared objects file (top)" in line]
    assert len(from_archive) > 5_000, loaded[:20]
    assert any("io.delta." in line for line in from_archive)  # Delta's jar too, not only Spark's


def test_the_archive_is_named_for_what_it_must_match(monkeypatch, tmp_path):
    here = class_archive.path()
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert class_archive.path() != here
    assert class_archive.java_options() == ""  # no archive for that conf folder: a plain start


def test_java_options_name_the_archive_and_keep_the_jvm_quiet_about_it(monkeypatch):
    options = class_archive.java_options()
    assert f"-XX:SharedArchiveFile={class_archive.path()}" in options
    assert "-Xshare:auto" in options and "-Xlog:cds=off" in options
    monkeypatch.setenv("MV_CLASS_ARCHIVE", "0")  # a session then starts as if there were none
    assert class_archive.java_options() == ""


def _classes_loaded_by_a_new_session(tmp_path) -> list[str]:
    """The JVM's class-loading log of a session started in a new process by mv.session()."""
    log = tmp_path / "classes.log"
    script = textwrap.dedent(f"""
        import mv
        from mv import config
        java = config.spark_defaults().get("spark.driver.extraJavaOptions", "")
        spark = mv.session(conf={{"spark.driver.extraJavaOptions": java + " -Xlog:class+load=info:file={log}"}})
        assert spark.sql("SELECT 1").first()[0] == 1
    """)
    home = tmp_path / "home"
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300, capture_output=True,
                   env={**os.environ, "MV_HOME": str(home)})
    return log.read_text().splitlines()
