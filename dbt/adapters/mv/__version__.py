"""The adapter's version, as dbt logs it: the mv-engine distribution's."""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    version = _version("mv-engine")
except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
    version = "0.1.0"
