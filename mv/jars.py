"""The JVM jars a session needs: Delta Lake's, fetched once, and the engine's extension, built once.

Delta's pip package holds no jars, so they come from Maven Central through ``mvn`` into the cache
folder (or, on a machine without Maven, through Spark's own Ivy at session start): Delta's artifact
built for the running Spark line (``delta-spark_4.0_2.13`` on Spark 4.0, and so on). The extension
is compiled from ``mv/jvm/*.scala`` with the Scala compiler inside pyspark's jars folder, against
the running Spark's own jars, and cached under a name made of the sources' hash and the Spark
version, so a change to either rebuilds it. A Spark line no Delta release supports is refused here,
before anything starts (``MV_SPARK_VERSION_UNSUPPORTED``).

Example:
    $ python -m mv.jars          # fetch Delta, build the extension, print the jar paths
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pyspark

from mv import config, errors

JVM_SOURCES = config.PACKAGE_DIR / "jvm"
EXTENSION_CLASS = "io.mvengine.MvSparkSessionExtension"
# The Spark lines whose Delta artifact (delta-spark_<line>_2.13) the pinned Delta release publishes
# and whose pyspark its Python package accepts; Scala 2.13 on every one.
SUPPORTED_SPARK_LINES = ("4.0", "4.1", "4.2")
SPARK_LINE_RESOURCE = "io/mvengine/spark-line.txt"  # read by SparkCompat.builtLine


def spark_line(version: str | None = None) -> str:
    """The running (or given) Spark's line, "4.1" for 4.1.4; MV_SPARK_VERSION_UNSUPPORTED if the engine has no
    Delta for it.

    Example:
        >>> spark_line("4.0.5")
        '4.0'
    """
    version = version or pyspark.__version__
    line = ".".join(version.split(".")[:2])
    if line not in SUPPORTED_SPARK_LINES:
        raise errors.spark_version_unsupported(version, SUPPORTED_SPARK_LINES)
    return line


def pyspark_jars_dir() -> Path:
    return Path(pyspark.__file__).resolve().parent / "jars"


def delta_coordinates() -> list[str]:
    """Maven coordinates of the Delta jars for the running Spark line and the pinned delta-spark release."""
    version = config.engine_defaults().get("delta.version", "4.4.0")
    return [f"io.delta:delta-spark_{spark_line()}_2.13:{version}", f"io.delta:delta-storage:{version}"]


def _jar_name(coordinate: str) -> str:
    _, artifact, version = coordinate.split(":")
    return f"{artifact}-{version}.jar"


def delta_jars(fetch: bool = True) -> list[Path] | None:
    """Paths of the cached Delta jars, fetching them with mvn when missing; None when that cannot be done."""
    folder = config.cache_dir() / "delta"
    coordinates = delta_coordinates()
    jars = [folder / _jar_name(c) for c in coordinates]
    missing = [c for c, jar in zip(coordinates, jars) if not jar.is_file()]
    if missing and fetch and shutil.which("mvn"):
        folder.mkdir(parents=True, exist_ok=True)
        for coordinate in missing:
            subprocess.run(
                ["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={coordinate}",
                 f"-DoutputDirectory={folder}"],
                check=True, capture_output=True,
            )
    return jars if all(jar.is_file() for jar in jars) else None


def _ivy_delta_jars() -> list[Path] | None:
    """The Delta jars as Spark's Ivy left them after a session fetched them, if it did."""
    names = [_jar_name(c) for c in delta_coordinates()]
    for folder in sorted(Path.home().glob(".ivy2*/jars")):
        jars = [folder / f"{c.split(':')[0]}_{name}" for c, name in zip(delta_coordinates(), names)]
        if all(jar.is_file() for jar in jars):
            return jars
    return None


def _sources() -> list[Path]:
    return sorted(JVM_SOURCES.glob("*.scala"))


def extension_jar_path() -> Path:
    """Where the extension jar for these sources, this Spark version and Delta release is cached."""
    digest = hashlib.sha256(pyspark.__version__.encode())
    digest.update(" ".join(delta_coordinates()).encode())
    for source in _sources():
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    return config.cache_dir() / f"mv-extension-{digest.hexdigest()[:16]}.jar"


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def extension_jar() -> Path:
    """The compiled extension jar, built now if these sources have not been built before."""
    jar = extension_jar_path()
    if jar.is_file():
        return jar
    jar.parent.mkdir(parents=True, exist_ok=True)
    delta = delta_jars() or _ivy_delta_jars()
    if delta is None:  # the refresh's commit (RefreshCommit.scala) is compiled against Delta's API
        raise RuntimeError("compiling the Spark extension needs Delta Lake's jars: install Maven (mvn), "
                           "which fetches them, and run `make setup` again")
    classpath = os.pathsep.join([str(pyspark_jars_dir() / "*"), *map(str, delta)])
    with tempfile.TemporaryDirectory(dir=jar.parent) as tmp:
        out = Path(tmp) / jar.name
        result = subprocess.run(
            [_java(), "-Xss8m", "-cp", classpath, "scala.tools.nsc.Main", "-usejavacp",
             "-classpath", classpath, "-deprecation", "-feature", "-d", str(out),
             *map(str, _sources())],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(f"compiling the Spark extension failed:\n{result.stdout}{result.stderr}")
        with zipfile.ZipFile(out, "a") as built:  # the extension refuses a session of another line
            built.writestr(SPARK_LINE_RESOURCE, spark_line())
        os.replace(out, jar)
    return jar


def main() -> int:
    try:
        spark_line()
    except errors.MvError as error:
        print(f"error {error}", file=sys.stderr)
        return 1
    delta = delta_jars()
    print("delta jars:", ", ".join(map(str, delta)) if delta else "not cached (Ivy fetches them at start)")
    print("extension jar:", extension_jar())
    return 0


if __name__ == "__main__":
    sys.exit(main())
