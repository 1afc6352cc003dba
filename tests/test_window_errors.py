"""Bad window function calls fail at analysis with a stable error class and a hint.

The cases are data: tests/fixtures/window_errors.txt, one `ERROR_CLASS | SQL` a line.
"""
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException

FIXTURE = Path(__file__).parent / "fixtures" / "window_errors.txt"


def _cases():
    for line in FIXTURE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            error_class, sql = (part.strip() for part in line.split("|", 1))
            yield pytest.param(error_class, sql, id=f"{error_class}: {sql[14:70]}")


@pytest.fixture(scope="module")
def bids(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW bids AS SELECT * FROM VALUES
        (TIMESTAMP'2020-04-15 08:05:00', 4.00, 'C') AS t(bidtime, price, item)""")
    yield
    spark.catalog.dropTempView("bids")  # a temp view would shadow `bids` in every later test of the session


@pytest.mark.parametrize("error_class, sql", list(_cases()))
def test_bad_call_raises_its_error_class(spark, bids, error_class, sql):
    with pytest.raises(AnalysisException) as raised:
        spark.sql(sql).collect()
    assert raised.value.getCondition() == error_class


@pytest.mark.parametrize("error_class, sql", [c.values for c in _cases() if c.values[0].startswith("MV_")])
def test_engine_errors_carry_a_hint_and_render_in_python(spark, bids, error_class, sql):
    with pytest.raises(AnalysisException) as raised:
        spark.sql(sql).collect()
    message = raised.value.getMessage()  # re-rendered by Spark from the class and parameters
    assert message.startswith(f"[{error_class}]")
    assert "Hint: " in message
    assert "\tat " not in str(raised.value), "no Java stack trace in the message"


def test_error_parameters_name_the_offending_values(spark, bids):
    with pytest.raises(AnalysisException) as raised:
        spark.sql("SELECT * FROM CUMULATE(TABLE(bids), DESCRIPTOR(bidtime), "
                  "INTERVAL '7' MINUTES, INTERVAL '1' HOUR)").collect()
    params = raised.value.getMessageParameters()
    assert "07" in params["step"] and "01" in params["size"]
