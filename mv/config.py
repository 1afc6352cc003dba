"""Where the engine's configuration and local state live, and what conf/ says.

Three folders matter:
  * the conf folder (``MV_CONF_DIR``, default: ``conf/`` of this checkout) holding
    ``spark-defaults.conf``, ``log4j2.properties`` and ``mv.conf``;
  * the home folder (``MV_HOME``, default: ``.mv`` beside the conf folder) holding the local
    warehouse and metastore;
  * the cache folder (``MV_CACHE_DIR``, default: ``~/.cache/mv``) holding downloaded and built jars,
    shared by every home.

Example:
    >>> from mv import config
    >>> config.spark_defaults()["spark.sql.session.timeZone"]
    'UTC'
"""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def conf_dir() -> Path:
    """The folder with spark-defaults.conf, log4j2.properties and mv.conf."""
    env = os.environ.get("MV_CONF_DIR")
    return Path(env).resolve() if env else PACKAGE_DIR.parent / "conf"


def home_dir() -> Path:
    """The folder with the local warehouse and metastore."""
    env = os.environ.get("MV_HOME")
    return Path(env).resolve() if env else conf_dir().parent / ".mv"


def cache_dir() -> Path:
    """The folder with fetched Delta jars and the compiled extension jar."""
    env = os.environ.get("MV_CACHE_DIR")
    return Path(env).resolve() if env else Path.home() / ".cache" / "mv"


def _read_pairs(path: Path, separator: str | None) -> dict[str, str]:
    pairs: dict[str, str] = {}
    if not path.is_file():
        return pairs
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(separator) if separator else _split_ws(line)
        pairs[key.strip()] = _expand(value.strip())
    return pairs


def _split_ws(line: str) -> tuple[str, str, str]:
    parts = line.split(None, 1)
    return parts[0], " ", parts[1] if len(parts) > 1 else ""


def _expand(value: str) -> str:
    return value.replace("${MV_HOME}", str(home_dir())).replace("${MV_CONF_DIR}", str(conf_dir()))


def spark_defaults() -> dict[str, str]:
    """Settings from spark-defaults.conf, with ${MV_HOME} and ${MV_CONF_DIR} filled in."""
    return _read_pairs(conf_dir() / "spark-defaults.conf", None)


def engine_defaults() -> dict[str, str]:
    """The engine's own settings from mv.conf."""
    return _read_pairs(conf_dir() / "mv.conf", "=")
