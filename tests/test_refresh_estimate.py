"""REFRESH POLICY AUTO weighs an incremental refresh against a full one (mv/estimate.py) and runs
the cheaper, with its own reason (FULL_CHEAPER); EXPLAIN shows the estimate and writes nothing.

Oracles: the view's query recomputed in full, and a twin view under REFRESH POLICY INCREMENTAL,
which never switches.
"""
import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlparse

import pytest

from mv.delta_tables import Table
from mv import delta_tables, estimate, refresh, state, window_refresh
from mv.estimate import MB, PAST_REFRESHES, Estimate, Past, Sizes, dearer_by_kind, hindsight, joined, past, recent, weigh
from mv.run import Outcome
from mv.query import Read, describe
from mv.settings import session_settings

SOURCE = "est_bids"
QUERY = (f"SELECT window_start, window_end, count(*) AS n, sum(v) AS total "
         f"FROM TUMBLE(TABLE({SOURCE}), DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY window_start, window_end")
VIEWS = {"est_auto": "AUTO", "est_incremental": "INCREMENTAL"}
WATERMARKED = "est_watermarked"  # AUTO, every window but the newest final: an update of old rows is late
ROWS_PER_WINDOW = 2000


def test_without_large_enough_past_refreshes_the_bytes_decide():
    small = [Past("full", MB, 2.0), Past("incremental", MB // 2, 1.0)]  # under 8 MB: mostly fixed costs
    assert weigh(300 * MB, 200 * MB, small).cheaper == "full"
    assert weigh(100 * MB, 200 * MB, small).cheaper == "incremental"
    assert weigh(100 * MB, 200 * MB, small).full_s is None


def test_an_incremental_refresh_costs_its_fixed_part_plus_its_rate_beyond_it():
    past = [Past("full", 1000 * MB, 30.0), Past("incremental", None, 2.0), Past("incremental", 100 * MB, 8.0)]
    estimate = weigh(900 * MB, 1000 * MB, past)
    assert (estimate.incremental_s, estimate.full_s, estimate.cheaper) == (56.0, 30.0, "full")  # 2 s + 900 x 0.06
    assert estimate.switches and "full is cheaper" in estimate.describe()


def test_a_fixed_part_above_a_whole_full_refresh_makes_full_cheaper_for_a_small_change():
    # Nexmark q7 at 10M bids: a full refresh of 1.7 s, incremental ones of 4.8-5.1 s whatever their size
    past = [Past("full", 95 * MB, 1.7), Past("incremental", 9 * MB, 4.8), Past("incremental", 12 * MB, 5.1)]
    estimate = weigh(8 * MB, 95 * MB, past)
    assert (estimate.incremental_s, estimate.full_s, estimate.cheaper) == (4.9, 1.7, "full")


def test_the_fixed_part_already_spent_reading_the_change_is_not_counted_again():
    # Nexmark q7 at 1M bids: 2.4 s of each incremental refresh is fixed, 2.2 s of it spent before weighing
    past = [Past("full", 95 * MB, 1.7), Past("incremental", 9 * MB, 2.4), Past("incremental", 12 * MB, 2.6)]
    estimate = weigh(8 * MB, 95 * MB, past, spent=2.2)
    assert (estimate.incremental_s, estimate.full_s, estimate.cheaper) == (0.3, 1.7, "incremental")  # 0.2 s left + 8 MB
    assert weigh(8 * MB, 95 * MB, past, spent=9.0).incremental_s == 0.1  # none left: the rate alone


def test_a_full_refresh_measured_only_by_the_views_first_is_tried_once_when_within_reach():
    # Nexmark q7 at 1M bids: created in 4.8 s (its tables made, its code compiled), refreshed
    # incrementally in 3.2 s, in full in 2.0 s once it is measured
    first = Past("full", 14 * MB, 4.8, "FIRST_REFRESH")
    past = [first, Past("incremental", MB, 3.2, "CHANGES_ONLY")]
    tried = weigh(MB, 14 * MB, past, spent=1.0)
    assert (tried.incremental_s, tried.full_s, tried.cheaper) == (2.5, 4.8, "incremental")
    assert tried.tries_full and tried.switches and "tried once" in tried.describe()
    measured = weigh(MB, 14 * MB, [*past, Past("full", 14 * MB, 2.0, "FULL_CHEAPER")], spent=1.0)
    assert (measured.full_s, measured.cheaper, measured.tries_full) == (2.0, "full", False)
    far = weigh(MB, 140 * MB, [replace(first, work_bytes=140 * MB, duration_s=48.0), past[1]], spent=1.0)
    assert not far.tries_full and not far.switches   # 48 s against 2.5 s: not worth a try


def test_a_change_planned_near_a_full_refresh_before_goes_full_unread_until_an_incremental_is_measured():
    """Nexmark's q6 at 1M bids: its first refresh after CREATE went full, the incremental one planned
    as much work; its next change was read only to switch again (1.02 s against 0.67 s in full)."""
    first = Past("full", 100 * MB, 3.0, "FIRST_REFRESH")
    switched = Past(*recent([first], "full", 100 * MB, 1.5, estimate.FULL_CHEAPER, False, 0.4, near_full=True)[-1])
    retracting = dearer_by_kind([first, switched], True, MB, 100 * MB)
    assert retracting.switches and retracting.planned_near_full and retracting.full_s == 1.1  # 1.5 s less 0.4 s
    assert "was priced above a full refresh for a change of this kind before" in retracting.describe()
    assert dearer_by_kind([first, switched], False, MB, 100 * MB).switches   # an append, as that one was
    after_retracting = replace(switched, retracts=True)   # an append may plan less than a retraction did
    assert dearer_by_kind([first, after_retracting], False, MB, 100 * MB) is None
    measured = [first, switched, Past("incremental", MB, 0.5, "CHANGES_ONLY", False)]
    assert not estimate.planned_near_full(measured, False)   # the incremental side has a measure now
    assert estimate.planned_near_full(measured, True)        # not for a change that takes rows away (q1: read 3 times)
    assert not estimate.planned_near_full([*measured, Past("incremental", MB, 2.5, "CHANGES_ONLY", True)], True)


def test_a_technique_not_yet_seen_takes_the_others_rate():
    estimate = weigh(50 * MB, 1000 * MB, [Past("full", 1000 * MB, 30.0)])
    assert (estimate.incremental_s, estimate.full_s, estimate.cheaper) == (1.5, 30.0, "incremental")


def test_an_incremental_refresh_not_yet_run_that_plans_nearly_a_full_refreshs_work_is_dearer():
    """Its side is its bytes alone, without what reading the change and merging cost: Nexmark's q6
    at 1M bids (the average of each seller's last ten closing prices) planned as much as a full
    refresh after CREATE and took 5.9 times as long incrementally."""
    first = [Past("full", 100 * MB, 3.0, "FIRST_REFRESH")]
    near = weigh(80 * MB, 100 * MB, first)
    assert (near.incremental_s, near.full_s, near.cheaper, near.switches) == (2.4, 3.0, "full", True)
    assert "not yet measured, plans at least 75% of a full refresh's work" in near.describe()
    assert weigh(70 * MB, 100 * MB, first).cheaper == "incremental"  # q20: 0.68 of the bytes, 0.79 of the time
    assert weigh(80 * MB, 100 * MB, []).cheaper == "incremental"  # no rate at all: the bytes alone
    measured = weigh(80 * MB, 100 * MB, [*first, Past("incremental", MB, 0.5), Past("incremental", 20 * MB, 0.9)])
    assert (measured.incremental_s, measured.cheaper) == (2.1, "incremental")  # its own: 0.5 s + 80 x 0.02


def test_a_change_over_several_sources_is_weighed_with_what_its_terms_join_it_to():
    """Before it is read: a dimension's update joins the whole fact twice (its two signs), twice more
    through an outer join's flipped rows, and takes rows from the view (read and merged)."""
    fact, dimension, view = Table(5, "f", bytes=90 * MB), Table(3, "d", bytes=MB), Table(9, "v", bytes=40 * MB)
    updated = replace(dimension, change_bytes=MB // 10, change_retracts=True)
    tables = {"fact": fact, "dim": updated, "v": view}
    fact_dim = [Read("fact", "fact"), Read("dim", "dim")]
    assert joined(tables, "v", fact_dim) == 2 * 90 * MB + 2 * 40 * MB
    assert joined(tables, "v", [Read("fact", "fact"), Read("dim", "dim", flips=True)]) == 4 * 90 * MB + 2 * 40 * MB
    appended = {**tables, "dim": dimension, "fact": replace(fact, change_bytes=MB, change_retracts=False)}
    assert joined(appended, "v", fact_dim) == MB  # the dimension once, the view not read
    assert joined(tables, "v", [Read("dim", "dim")]) == 0  # one read: nothing joined


def test_a_size_the_log_does_not_tell_is_named_by_the_estimate_weighed_after_reading():
    """Without every size before reading (a Parquet source, a change feed's commit cleaned up), the
    change is read and weighed by its planned bytes; EXPLAIN says which size was missing."""
    tables = {"src": Table(5, "s", bytes=None, change_bytes=None), "v": Table(9, "v", bytes=MB)}
    sizes = Sizes.of(tables, "v", [Read("src", "src")])
    assert (sizes.full, sizes.unknown) == (None, ("src", "src's change"))
    line = replace(weigh(MB, 2 * MB, []), unknown=sizes.unknown).describe()
    assert line.endswith("; not weighed before reading its change: unknown size of src, src's change")


def test_a_change_joined_on_columns_it_bounds_counts_nothing_of_the_other_reads_before_it_is_read():
    """Joined on an equality of columns (Read.equated), a view of rows' change terms are kept to
    its values' bounds, which may skip most of the other reads' files: before it is read, only its
    flips' reads of its own table (at both versions), the view it takes rows from and the small
    tables it joins count. A GROUP BY's touched keys are recomputed from the whole sources after
    its terms: all count."""
    fact, view = Table(5, "f", bytes=90 * MB), Table(9, "v", bytes=40 * MB)
    dimension = Table(3, "d", bytes=MB, change_bytes=MB // 10, change_retracts=True)
    tables = {"fact": fact, "dim": dimension, "v": view}
    on_id = [Read("fact", "fact"), Read("dim", "dim", equated=("id",))]
    assert joined(tables, "v", on_id, bounded=True) == 2 * 40 * MB
    flipped = [Read("fact", "fact"), Read("dim", "dim", flips=True, equated=("id",))]
    assert joined(tables, "v", flipped, bounded=True) == 2 * MB + 2 * 40 * MB
    regrouped = [Read("fact", "fact"), Read("dim", "dim", regroups=True, equated=("id",))]
    assert joined(tables, "v", regrouped, bounded=True) == 2 * 90 * MB + 2 * 40 * MB  # groups: read whole
    assert joined(tables, "v", on_id) == 2 * 90 * MB + 2 * 40 * MB  # a GROUP BY's touched keys, recomputed
    appended = {**tables, "dim": replace(dimension, change_bytes=None),
                "fact": replace(fact, change_bytes=MB, change_retracts=False)}
    assert joined(appended, "v", [Read("fact", "fact", equated=("dim",)), Read("dim", "dim", equated=("id",))],
                  bounded=True) == MB  # a 1 MB dimension has no files to skip: read whole, once


def test_a_self_join_weighs_its_change_against_the_other_read_of_its_own_table():
    """Nexmark q7's shape: new bids joined to the bids' per-window maximum. The raw read's term joins
    the whole aggregate; the aggregate's read runs twice (its two versions) against the raw read."""
    bids, view = Table(5, "b", bytes=90 * MB, change_bytes=MB, change_retracts=False), Table(9, "v", bytes=MB)
    reads = [Read("bids", "bids#0"), Read("bids", "bids#1", regroups=True)]
    assert joined({"bids": bids, "v": view}, "v", reads) == 90 * MB + 2 * 90 * MB + 2 * MB


def test_joined_windows_refreshed_window_by_window_read_only_the_touched_windows_of_the_other_source():
    """A window join (both sides TUMBLE, joined on the window) recomputes the windows its change
    touches from both sources, with file skipping: nothing known before reading says it reads a
    whole source, so the change alone is weighed (the demo's new_users stays incremental)."""
    persons, auctions, view = Table(5, "p", bytes=MB, change_bytes=MB // 100), Table(3, "a", bytes=MB), \
        Table(9, "v", bytes=MB // 10)
    tables = {"persons": persons, "auctions": auctions, "v": view}
    reads = [Read("persons", "persons"), Read("auctions", "auctions")]
    assert Sizes.of(tables, "v", reads).joined == MB
    assert Sizes.of(tables, "v", reads, by_terms=False).joined == 0


def test_a_change_is_priced_by_the_incremental_refreshes_of_its_kind():
    # appends refreshed in 0.9 s, changes that delete and update in 3.9 s, a full refresh in 2 s
    past = [Past("full", 30 * MB, 2.0), Past("incremental", MB, 0.9, "CHANGES_ONLY", False),
            Past("incremental", MB, 3.9, "CHANGES_ONLY", True)]
    assert weigh(MB, 30 * MB, past, retracts=False).cheaper == "incremental"
    assert weigh(MB, 30 * MB, past, retracts=True).cheaper == "full"
    assert weigh(MB, 30 * MB, past).cheaper == "incremental"   # kind unknown: every incremental refresh
    assert weigh(MB, 30 * MB, past[:2], retracts=True).cheaper == "incremental"   # none of its kind yet


def test_a_kind_of_change_whose_incremental_refreshes_took_longer_than_a_full_one_goes_full_unread():
    """Whatever the change's size: it is not read, so AUTO's full refresh costs what a full refresh does."""
    past = [Past("full", 30 * MB, 2.0, "FIRST_REFRESH"), Past("incremental", MB, 0.9, "CHANGES_ONLY", False),
            Past("incremental", MB, 3.9, "CHANGES_ONLY", True), Past("incremental", 2 * MB, 4.4, "CHANGES_ONLY", True)]

    found = dearer_by_kind(past, True, MB // 10, 30 * MB)

    assert (found.incremental_s, found.full_s, found.cheaper, found.switches) == (3.9, 2.0, "full", True)
    assert "incremental refreshes of changes that take rows away took at least 3.9 s" in found.describe()
    assert dearer_by_kind([*past, Past("full", 30 * MB, 1.6, "FULL_CHEAPER")], False, MB // 10, 30 * MB) is None
                                                                         # appends: 0.9 s is not dearer
    assert dearer_by_kind(past, True, MB // 10, 300 * MB) is None        # sources grown tenfold: tried again
    unmeasured = dearer_by_kind(past[:2], True, MB // 10, 30 * MB)      # none of its kind measured yet: its
    assert (unmeasured.cheaper, unmeasured.tries_full) == ("incremental", True)   # bound, 1.8 s, tries full once
    dear_appends = [past[0], Past("incremental", MB, 2.5, "CHANGES_ONLY", False)]
    at_least_appends = dearer_by_kind(dear_appends, True, MB // 10, 30 * MB)   # it costs at least an append
    assert at_least_appends.cheaper == "full" and "2 times the view's appends: 5.0 s" in at_least_appends.describe()
    assert dearer_by_kind(past, None, MB // 10, 30 * MB) is None         # kind unknown
    assert dearer_by_kind(past[1:], True, MB // 10, 30 * MB) is None     # no full refresh measured


def test_a_change_that_takes_rows_away_costs_at_least_twice_the_appends_until_one_is_measured():
    """It also reads the view to net and merge: Nexmark's views of windows, aggregates and partitions
    at 1M bids took 0.7-2.5 times their fastest append for their first such change (q12: 4.4)."""
    full, appends = Past("full", 30 * MB, 1.2, "FULL_CHEAPER"), Past("incremental", MB, 0.8, "CHANGES_ONLY", False)

    found = dearer_by_kind([full, appends], True, MB // 10, 30 * MB)

    assert (found.incremental_s, found.full_s, found.switches, found.tries_full) == (1.6, 1.2, True, False)
    assert dearer_by_kind([full, appends], False, MB // 10, 30 * MB) is None        # an append: 0.8 s
    assert dearer_by_kind([full, appends], True, MB // 10, 60 * MB) is None         # full grown to 2.4 s: tried
    measured = [full, appends, Past("incremental", MB, 1.1, "CHANGES_ONLY", True)]
    assert dearer_by_kind(measured, True, MB // 10, 30 * MB) is None                # measured: 1.1 s beats 1.2 s


def test_a_view_of_rows_prices_a_change_that_takes_rows_away_at_four_times_its_appends(spark, views):
    """Its append is the query over the appended rows alone, written without reading the view: Nexmark's
    views of rows at 1M bids took 2.9-9.1 times their fastest append for their first such change, and
    at twice it AUTO explored one at 2.0-4.9 times the cheaper way."""
    full, appends = Past("full", 30 * MB, 1.2, "FULL_CHEAPER"), Past("incremental", MB, 0.4, "CHANGES_ONLY", False)
    rows = estimate.retracts_over_appends(describe(spark, f"SELECT id, v FROM {SOURCE} WHERE v > 1"))

    found = dearer_by_kind([full, appends], True, MB // 10, 30 * MB, over_appends=rows)

    assert (rows, found.incremental_s, found.switches) == (4.0, 1.6, True)
    assert "4 times the view's appends: 1.6 s" in found.describe()
    assert dearer_by_kind([full, appends], True, MB // 10, 30 * MB) is None          # twice: 0.8 s, explored
    assert estimate.retracts_over_appends(describe(spark, QUERY)) == 2.0             # windows: twice


def test_a_kind_of_change_measured_against_the_views_first_refresh_alone_tries_a_full_refresh_once():
    """The first refresh also created the view's tables (Nexmark's q7 at 1M bids: 4.8 s, its later
    full refreshes 2.0 s): a kind within TRY_FULL_WITHIN of it measures a full refresh, whatever the
    change's size, as `weigh` does for a change it weighs."""
    first = Past("full", 14 * MB, 4.8, "FIRST_REFRESH")
    appends, changes = Past("incremental", MB, 1.0, "CHANGES_ONLY", False), Past("incremental", MB, 3.2, "CHANGES_ONLY", True)

    tried = dearer_by_kind([first, appends, changes], True, MB // 10, 14 * MB)

    assert (tried.cheaper, tried.tries_full, tried.switches) == ("incremental", True, True)
    assert "full is tried once" in tried.describe()
    assert dearer_by_kind([first, appends, changes], False, MB // 10, 14 * MB) is None   # 4.8 s is not within 3 x 1.0 s
    bounded = dearer_by_kind([first, appends], True, MB // 10, 14 * MB)   # by the appends' bound: 2.0 s
    assert (bounded.incremental_s, bounded.tries_full, bounded.from_appends) == (2.0, True, 2.0)
    measured = [first, appends, changes, Past("full", 14 * MB, 4.0, "FULL_CHEAPER")]
    assert dearer_by_kind(measured, True, MB // 10, 14 * MB) is None   # measured once: 4.0 s against 3.2 s


def test_a_change_that_takes_rows_away_never_measured_tries_a_full_refresh_known_from_the_first_alone():
    """Its appends' bound is the least it costs, not a measure, and the first refresh overstates a
    full one: when the two are within TRY_FULL_WITHIN, the full refresh is measured first, unread.
    Nexmark's views at 1M bids took 3-20 times their appends' history time for such a change: q0
    and q1 read it to switch (1.9-2.4 times the cheaper way), q2 and q16 explored it (1.7-6.6)."""
    first = Past("full", 12 * MB, 0.9, "FIRST_REFRESH")
    append = Past("incremental", MB, 0.18, "CHANGES_ONLY", False)

    tried = dearer_by_kind([first, append], True, MB, 33 * MB, over_appends=4.0, source_bytes=12 * MB)

    assert (tried.incremental_s, tried.full_s, tried.cheaper) == (0.7, 0.9, "incremental")   # 4 x 0.18 s
    assert tried.tries_full and tried.switches and not tried.near_full
    assert "full is tried once" in tried.describe() and "4 times the view's appends" in tried.describe()
    fast = Past("incremental", MB, 0.05, "CHANGES_ONLY", False)
    assert dearer_by_kind([first, fast], True, MB, 33 * MB, over_appends=4.0, source_bytes=12 * MB) is None  # 0.2 s: read
    measured = [first, append, Past("full", 33 * MB, 0.6, "FULL_CHEAPER", True)]
    after = dearer_by_kind(measured, True, MB, 33 * MB, over_appends=4.0, source_bytes=12 * MB)
    assert (after.full_s, after.cheaper, after.tries_full) == (0.6, "full", False)   # measured: under the bound


def test_a_full_refresh_switched_to_after_reading_the_change_is_timed_without_the_reading():
    """A full refresh priced with the change's reading in it would look dearer than the one AUTO
    runs before reading: Nexmark's q8 at 1M bids went full after reading in 2.9-3.7 s, its twin
    under REFRESH POLICY FULL took 1.1-1.3 s."""
    switched = Past("full", 30 * MB, 3.0, "FULL_CHEAPER", True, switched_s=2.0)
    changes = Past("incremental", MB, 2.5, "CHANGES_ONLY", True)

    found = dearer_by_kind([switched, changes], True, MB // 10, 30 * MB)

    assert (found.full_s, found.cheaper) == (1.0, "full")
    assert weigh(29 * MB, 30 * MB, [switched, changes]).full_s == 1.0
    assert dearer_by_kind([switched, changes], True, MB // 10, 30 * MB, spent=1.8) is None  # read: 2.8 s against 2.5 s


def test_a_view_too_small_for_a_rate_is_priced_by_the_times_of_its_full_refreshes():
    """Under MIN_WORK a refresh's time is mostly fixed costs, so no rate is measured; Nexmark's q8
    at 1M bids reads 4 MB, and AUTO read and planned each change before going full (3.3 times the
    cheaper)."""
    first = Past("full", 4 * MB, 3.5, "FIRST_REFRESH")
    fulls = [Past("full", 4 * MB, 1.2, "FULL_CHEAPER"), Past("full", 4 * MB, 3.1, "FULL_CHEAPER", switched_s=1.9),
             Past("full", 4 * MB, 1.4, "FULL_CHEAPER")]
    appends = Past("incremental", MB // 10, 2.1, "CHANGES_ONLY", False)

    found = dearer_by_kind([first, *fulls, appends], False, MB // 10, 4 * MB)

    assert (found.full_s, found.incremental_s, found.cheaper) == (1.2, 2.1, "full")   # the median of 1.2, 1.2, 1.4
    assert dearer_by_kind([first, appends], False, MB // 10, 4 * MB) is None       # the first refresh alone: no
    assert dearer_by_kind([first, *fulls, appends], False, MB // 10, 40 * MB) is None   # grown past MIN_WORK


def test_a_small_change_is_not_switched_whatever_the_estimate():
    estimate = weigh(300 * MB, 200 * MB, [])
    assert not type(estimate)(300 * MB, 200 * MB, small_change=True).switches and estimate.switches


def test_the_estimate_kept_with_a_refresh_counts_both_sides_from_its_start():
    """The history's estimated_* columns compare with its duration_s: an estimate of what is left of
    a refresh has the seconds it had spent added; a by-kind one already counts them."""
    outcome = Outcome("v", "incremental", "CHANGES_ONLY", started_at=time.time() - 1.5)
    outcome.weighed(Estimate(MB, 9 * MB, incremental_s=2.0, full_s=4.0))
    assert 3.5 <= outcome.estimated_incremental_s < 3.8 and 5.5 <= outcome.estimated_full_s < 5.8  # 1.5 s in
    outcome.weighed(Estimate(MB, 9 * MB, incremental_s=3.9, full_s=1.8, at_least=True, by_kind=True))
    assert (outcome.estimated_incremental_s, outcome.estimated_full_s) == (3.9, 1.8)
    outcome.weighed(Estimate(MB, 9 * MB))  # bytes alone: the last estimate in seconds stays
    assert (outcome.estimated_incremental_s, outcome.estimated_full_s) == (3.9, 1.8)


def test_hindsight_says_how_far_the_side_that_ran_was_from_its_estimate():
    assert hindsight("full", "FULL_CHEAPER", 3.0, 5.0, 2.5) == \
        "full (FULL_CHEAPER) in 3.0 s; estimated incremental 5.0 s, full 2.5 s (took 1.20x that)"
    assert hindsight("incremental", "CHANGES_ONLY", 0.9, None, None) == \
        "incremental (CHANGES_ONLY) in 0.9 s; not estimated in seconds"


@pytest.fixture(scope="module")
def views(spark):
    """Three files of source rows, ten windows each, and the two views over them."""
    spark.sql(f"DROP TABLE IF EXISTS {SOURCE}")
    spark.sql(f"CREATE TABLE {SOURCE} (id BIGINT, v BIGINT, ts TIMESTAMP) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    per_file = 10 * ROWS_PER_WINDOW
    for part in range(3):  # in time order: a window's rows are in one file
        spark.range(part * per_file, (part + 1) * per_file, numPartitions=1).selectExpr(
            "id", "id % 7 AS v", f"timestamp_seconds(1704067200 + id * 600 DIV {ROWS_PER_WINDOW}) AS ts") \
            .write.insertInto(SOURCE)
    for name, policy in VIEWS.items():
        spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS {name}")
        spark.sql(f"CREATE MATERIALIZED VIEW {name} REFRESH POLICY {policy} AS {QUERY}").collect()
    spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS {WATERMARKED}")
    spark.sql(f"CREATE MATERIALIZED VIEW {WATERMARKED} WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE "
              f"AS {QUERY}").collect()
    yield list(VIEWS)
    for name in [*VIEWS, WATERMARKED]:
        spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS {name}")
    spark.sql(f"DROP TABLE IF EXISTS {SOURCE}")


def refreshed(spark, view):
    row = spark.sql(f"REFRESH MATERIALIZED VIEW {view}").first()
    return row.technique, row.reason


def explained(spark, view):
    return dict(map(tuple, spark.sql(f"EXPLAIN MATERIALIZED VIEW {view}").collect()))


def version(spark, table):
    return spark.sql(f"SELECT version FROM mv_delta_tables('{table}')").first()[0]


def latest(spark, view):
    return spark.sql(f"SELECT technique, reason, work_bytes FROM mv_refresh_history('default', '{view}', '1')").first()


def assert_views_equal_their_query(spark):
    expected = sorted(spark.sql(QUERY).collect())
    for view in VIEWS:
        assert sorted(spark.sql(f"SELECT * FROM {view}").collect()) == expected, view


def test_a_change_in_one_window_is_weighed_and_refreshed_incrementally(spark, views):
    spark.sql(f"INSERT INTO {SOURCE} SELECT id, 1, timestamp_seconds(1704067200 + 60) FROM range(1000000, 1001000)")
    before = version(spark, "est_auto")

    plan = explained(spark, "est_auto")

    assert (plan["technique"], plan["reason"]) == ("incremental", "CHANGES_ONLY")
    assert plan["estimate"].startswith("incremental ") and "incremental is cheaper" in plan["estimate"]
    assert version(spark, "est_auto") == before  # EXPLAIN wrote nothing
    assert [refreshed(spark, view) for view in views] == [("incremental", "CHANGES_ONLY")] * 2
    first_full = spark.sql("SELECT work_bytes FROM mv_refresh_history('default', 'est_auto')").first()[0]
    assert first_full > 0 and latest(spark, "est_auto").work_bytes > 0  # both recorded what they did
    assert_views_equal_their_query(spark)


def test_the_history_and_explain_say_how_far_the_last_estimate_was_off(spark, views):
    spark.sql(f"INSERT INTO {SOURCE} SELECT id, 3, timestamp_seconds(1704067200 + 600 * 2) FROM range(3000000, 3001000)")
    with session_settings(spark, {"mv.estimate.minWorkBytes": "1"}):  # this suite's tiny refreshes give rates
        refreshed(spark, "est_auto")
        plan = explained(spark, "est_auto")
    last = spark.sql("SELECT refresh_id, technique, duration_s, estimated_incremental_s, estimated_full_s "
                     "FROM mv_refresh_history('default', 'est_auto', '1')").first()
    ran = last.estimated_incremental_s if last.technique == "incremental" else last.estimated_full_s

    assert last.estimated_incremental_s > 0 and last.estimated_full_s > 0
    assert plan["last_refresh"].startswith(f"{last.refresh_id}: {last.technique} (")
    assert f"took {last.duration_s / ran:.2f}x that" in plan["last_refresh"]


def test_a_change_larger_than_a_full_refresh_is_refreshed_in_full_under_auto(spark, views):
    spark.sql(f"UPDATE {SOURCE} SET v = v + 1")  # every row: its change feed holds each row twice

    plan = explained(spark, "est_auto")

    updated = f"{SOURCE}@{version(spark, SOURCE) - 1}"   # what the estimate reads, should it fail
    sizes = spark.sql(f"SELECT name, bytes, change_bytes FROM mv_delta_tables('{updated}', 'est_auto')").collect()
    assert (plan["technique"], plan["reason"]) == ("full", "FULL_CHEAPER"), (plan["estimate"], sizes)
    assert "full is cheaper" in plan["estimate"]
    assert explained(spark, "est_incremental")["technique"] == "incremental"  # its policy does not switch
    assert [refreshed(spark, view) for view in views] == [("full", "FULL_CHEAPER"), ("incremental", "CHANGES_ONLY")]
    assert latest(spark, "est_auto").work_bytes > 0
    assert_views_equal_their_query(spark)


def test_a_table_whose_log_keeps_no_checksums_still_has_its_size_before_reading(spark):
    """AUTO's estimate before reading needs every table's bytes; a table another writer left without
    checksum files (delta-rs; a writer with them turned off) has them from its state, as Delta's
    own DESCRIBE DETAIL does."""
    spark.sql("DROP TABLE IF EXISTS est_unsummed")
    spark.sql("CREATE TABLE est_unsummed (id BIGINT) USING delta")
    spark.range(1000).write.insertInto("est_unsummed")
    log = Path(urlparse(spark.sql("DESCRIBE DETAIL est_unsummed").first().location).path) / "_delta_log"
    for checksum in log.glob("*.crc"):
        checksum.unlink()
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # its snapshot read again, without them

    found = spark.sql("SELECT bytes FROM mv_delta_tables('est_unsummed')").first().bytes

    assert found == spark.sql("DESCRIBE DETAIL est_unsummed").first().sizeInBytes > 0
    spark.sql("DROP TABLE est_unsummed")


def test_a_refresh_keeps_its_newest_refreshes_in_its_state_as_the_history_has_them(spark, views):
    """The next refresh's estimate reads them from the state it starts from, the last timed up to
    the view's newest commit, not from the view's history."""
    for i in range(2):
        spark.sql(f"INSERT INTO {SOURCE} SELECT id, 2, timestamp_seconds(1704067200 + 120) FROM range({i}, {i + 10})")
        refreshed(spark, "est_auto")
    found = state.read(spark, "est_auto")
    end = refresh.last_refresh_end(delta_tables.lookup(spark, ["est_auto"])["est_auto"])
    history = spark.sql("SELECT technique, work_bytes, duration_s, reason "
                        "FROM mv_refresh_history('default', 'est_auto')")
    assert end is not None and len(found.recent) >= 3
    kept = [replace(p, retracts=None, switched_s=0.0, near_full=False, cold=False)   # not in the history
            for p in past(spark, "est_auto", found, end)]
    assert kept == [Past(*row) for row in history.collect()][-PAST_REFRESHES:]
    # its change, an insert, took no rows away; no switch; the view's second incremental refresh here: warm
    assert found.recent[-1][4:] == [False, 0.0, False, False]
    assert [p[-1] for p in found.recent if p[0] == "incremental"][:1] == [True]   # its first: cold


def test_a_cold_first_incremental_refresh_does_not_price_the_warm_ones_after_it(spark, views, monkeypatch):
    """The view's first incremental refresh in a process generates its plans' code and loads their
    classes (bench.joins at 1M bids: 5.2-6.2 s, then 2.4-3.1 s): once this process has run one, the
    estimate leaves it out. A process that refreshes once (a scheduled `mv refresh`) keeps it."""
    for i in range(2):
        spark.sql(f"INSERT INTO {SOURCE} SELECT id, 2, timestamp_seconds(1704067200 + 120) FROM range({i}, {i + 10})")
        refreshed(spark, "est_incremental")
    found = state.read(spark, "est_incremental")
    end = refresh.last_refresh_end(delta_tables.lookup(spark, ["est_incremental"])["est_incremental"])
    kept = [p.cold for p in past(spark, "est_incremental", found, end) if p.technique == "incremental"]
    weighed = [p.cold for p in estimate.measured(spark, "est_incremental", found, end) if p.technique == "incremental"]
    assert kept[0] and not any(kept[1:]) and weighed == kept[1:], (kept, weighed)   # the view's first here: cold
    monkeypatch.setattr(estimate, "_WARM", {})   # another process: every refresh of its own cold
    assert len(estimate.measured(spark, "est_incremental", found, end)) == len(found.recent)


def test_a_cold_refresh_alone_of_its_technique_prices_it_at_half_its_time():
    """Until a warm refresh of its technique is measured, a cold one is all there is: its time over
    COLD_OVER_WARM prices the next ones, so that the view's first change that takes rows away is
    priced from its appends before being read (Nexmark at 1M bids: q2's was explored incrementally at
    6.0 times a full refresh, q8's read to switch at 4.6 times). A process that runs it cold keeps it."""
    first = Past("full", 30 * MB, 1.2, "FIRST_REFRESH")
    cold = Past("incremental", MB, 3.0, "CHANGES_ONLY", False, cold=True)
    warm = Past("incremental", MB, 1.1, "CHANGES_ONLY", False)

    assert estimate.as_warm([first, cold], {"full", "incremental"}) == [first, replace(cold, duration_s=1.5)]
    assert estimate.as_warm([first, cold, warm], {"incremental"}) == [first, warm]
    assert estimate.as_warm([first, cold, warm], set()) == [first, cold, warm]   # a scheduled `mv refresh`
    assert dearer_by_kind(estimate.as_warm([first, cold], {"incremental"}), True, MB // 10, 30 * MB,
                          over_appends=4.0).incremental_s == 6.0


def test_a_change_that_takes_rows_away_is_never_priced_by_appends_once_read():
    """Its appends cost a fraction of it (Nexmark's q0 at 1M bids: appends 0.2-0.4 s, its first
    change of updates and deletes priced from them at 1.1 s, took 3.5 s): with none of its kind
    measured, it is priced as not yet measured, by its planned bytes near a full refresh's."""
    past = [Past("full", 30 * MB, 1.2, "FULL_CHEAPER"), Past("incremental", MB, 0.3, "CHANGES_ONLY", False)]

    change, append = weigh(25 * MB, 30 * MB, past, retracts=True), weigh(25 * MB, 30 * MB, past, retracts=False)

    assert (change.unmeasured, change.cheaper) == (True, "full")
    assert (append.unmeasured, append.incremental_s, append.cheaper) == (False, 1.3, "full")
    assert weigh(MB, 30 * MB, past, retracts=True).cheaper == "incremental"   # planned little: tried


def test_a_change_that_takes_rows_away_not_yet_measured_costs_at_least_its_appends_bound_once_weighed():
    """Before it is read, `dearer_by_kind` bounds it by four times the fastest append of a view of
    rows; under a full refresh's time, the bound let it be read and weighed, and its bytes alone
    priced it: Nexmark's q14, q15, q17 and q21 at 1M bids were explored at 1.7-3.4 times a full
    refresh. The bound is the least its fixed part costs."""
    past = [Past("full", 30 * MB, 1.4, "FULL_CHEAPER"), Past("incremental", MB, 0.3, "CHANGES_ONLY", False)]
    assert dearer_by_kind(past, True, 10 * MB, 30 * MB, over_appends=4.0) is None   # 1.2 s: under 1.4 s

    found = weigh(10 * MB, 30 * MB, past, retracts=True, over_appends=4.0)

    assert (found.incremental_s, found.full_s, found.cheaper) == (1.7, 1.4, "full")   # 1.2 s + 10 MB at 0.047 s
    assert "cost at least 4 times the view's appends" in found.describe()
    assert weigh(10 * MB, 30 * MB, past, retracts=False).incremental_s == 0.8   # an append: its own, 0.3 s + 10 MB
    assert weigh(10 * MB, 30 * MB, past, spent=1.0, retracts=True, over_appends=4.0).incremental_s == 0.7  # 0.2 s left


def test_a_view_with_a_watermark_reads_its_change_first_so_its_late_rows_are_kept(spark, views):
    late_before = spark.sql(f"SELECT count(*) FROM {WATERMARKED}__late").first()[0] \
        if spark.catalog.tableExists(f"{WATERMARKED}__late") else 0
    spark.sql(f"UPDATE {SOURCE} SET v = v + 1")  # every row, most of them in final windows

    row = spark.sql(f"REFRESH MATERIALIZED VIEW {WATERMARKED}").first()

    assert row.late_rows > 0 and row.reason in ("CHANGES_ONLY", "FULL_CHEAPER")
    assert spark.sql(f"SELECT count(*) FROM {WATERMARKED}__late").first()[0] == late_before + row.late_rows


@pytest.mark.parametrize("window, late_rows", [
    ("TUMBLE(TABLE({source}), DESCRIPTOR(ts), INTERVAL '10' MINUTES)", 12),   # 5 updates (two images), a delete,
    ("HOP(TABLE({source}), DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)", 24)])  # a late insert
def test_a_watermarked_view_going_full_before_reading_keeps_the_late_rows_an_incremental_refresh_keeps(
        spark, monkeypatch, window, late_rows):
    """Under a watermark, AUTO asks the view's refreshes of the change's kind before reading it
    (window_refresh.full_ahead). When they say full, EXPLAIN says so and writes nothing; REFRESH
    reads only the change's rows that may be late (its touched windows are never found), and the
    late table gets the rows, and the view the windows, that an incremental refresh gives its twin
    (under HOP a row late in both its windows counts twice). A change with no row after the
    watermark may be all late: it is refreshed incrementally, which writes its late rows alone."""
    source, views = "est_late_bids", {"est_late_auto": "AUTO", "est_late_twin": "INCREMENTAL"}
    spark.sql(f"DROP TABLE IF EXISTS {source}")
    spark.sql(f"CREATE TABLE {source} (id BIGINT, v BIGINT, ts TIMESTAMP) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql(f"INSERT INTO {source} SELECT id, id % 7, timestamp_seconds(1704067200 + id * 60) FROM range(60)")
    query = (f"SELECT window_start, window_end, count(*) AS n, sum(v) AS total FROM {window.format(source=source)} "
             "GROUP BY window_start, window_end")
    for name, policy in views.items():   # one row a minute: the watermark (minute 58) makes the windows to 00:50 final
        spark.sql(f"DROP MATERIALIZED VIEW IF EXISTS {name}")
        spark.sql(f"CREATE MATERIALIZED VIEW {name} WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE "
                  f"REFRESH POLICY {policy} AS {query}").collect()
    full_known = Estimate(MB, 2 * MB, 9.0, 1.0, at_least=True, by_kind=True)   # its kind took 9 s, full 1 s
    monkeypatch.setattr(window_refresh, "known_dearer",
                        lambda run: full_known if run.view.definition.policy == "AUTO" else None)
    touched, touched_windows = [], window_refresh.touched_windows
    monkeypatch.setattr(window_refresh, "touched_windows", lambda *a, **k: touched.append(1) or touched_windows(*a, **k))
    spark.sql(f"UPDATE {source} SET v = v + 100 WHERE id < 5")    # late: their windows are final
    spark.sql(f"DELETE FROM {source} WHERE id = 20")
    spark.sql(f"INSERT INTO {source} VALUES (100, 1, timestamp_seconds(1704067200 + 180)), "   # late
              f"(101, 2, timestamp_seconds(1704067200 + 65 * 60))")                             # on time

    plan = explained(spark, "est_late_auto")
    assert (plan["technique"], plan["reason"]) == ("full", "FULL_CHEAPER")
    assert not spark.catalog.tableExists("est_late_auto__late")   # EXPLAIN wrote no late row
    auto = spark.sql("REFRESH MATERIALIZED VIEW est_late_auto").first()
    assert not touched
    twin = spark.sql("REFRESH MATERIALIZED VIEW est_late_twin").first()

    assert (auto.technique, auto.reason, twin.technique) == ("full", "FULL_CHEAPER", "incremental")
    assert auto.late_rows == twin.late_rows == late_rows
    late = [sorted(spark.sql(f"SELECT * EXCEPT (detected_at) FROM {name}__late").collect()) for name in views]
    assert late[0] == late[1]
    assert sorted(spark.sql("SELECT * FROM est_late_auto").collect()) == \
        sorted(spark.sql("SELECT * FROM est_late_twin").collect())

    spark.sql(f"DELETE FROM {source} WHERE id = 30")   # nothing after the watermark: it may all be late
    auto, twin = [spark.sql(f"REFRESH MATERIALIZED VIEW {name}").first() for name in views]
    assert (auto.technique, auto.late_rows) == ("incremental", twin.late_rows)   # its late row alone, written
    assert sorted(spark.sql("SELECT * FROM est_late_auto").collect()) == \
        sorted(spark.sql("SELECT * FROM est_late_twin").collect())
    for name in views:
        spark.sql(f"DROP MATERIALIZED VIEW {name}")
    spark.sql(f"DROP TABLE {source}")


def test_an_invalid_minimum_work_setting_fails_by_name(spark, views):
    refreshed(spark, "est_auto")  # what earlier tests changed
    spark.sql(f"INSERT INTO {SOURCE} SELECT id, 1, timestamp_seconds(1704067200 + 60) FROM range(2000000, 2001000)")
    before = version(spark, "est_auto")
    with session_settings(spark, {"mv.estimate.minWorkBytes": "lots"}), \
            pytest.raises(Exception, match="MV_INVALID_SETTING.*mv.estimate.minWorkBytes"):
        spark.sql("REFRESH MATERIALIZED VIEW est_auto").collect()
    assert version(spark, "est_auto") == before
    assert refreshed(spark, "est_auto")[1] in ("CHANGES_ONLY", "FULL_CHEAPER")  # tiny: either may be cheaper
    assert sorted(spark.sql("SELECT * FROM est_auto").collect()) == sorted(spark.sql(QUERY).collect())


def test_the_first_refresh_prices_a_full_one_by_the_sources_bytes_alone():
    """The first refresh wrote the view from nothing: its work was its sources' bytes. A later full
    refresh's work also counts the view's files twice, which the first's rate priced as dearly as
    the sources: Nexmark's q0 at 1M bids (a view as large as its source) was estimated at 3.1 s in
    full and took 0.7 s, so AUTO read its first change of updates and deletes before switching."""
    first = Past("full", 12 * MB, 0.9, "FIRST_REFRESH")
    append = Past("incremental", MB, 0.3, "CHANGES_ONLY", False)

    by_sources = weigh(MB, 33 * MB, [first, append], source_bytes=13 * MB)
    assert by_sources.full_s == 1.0                                      # 0.9 s x 13 / 12, not 0.9 x 33 / 12
    assert weigh(MB, 33 * MB, [first, append]).full_s == 2.5             # the sources' bytes unknown: the whole work
    measured = Past("full", 33 * MB, 0.7, "FULL_CHEAPER")
    assert weigh(MB, 33 * MB, [first, append, measured], source_bytes=13 * MB).full_s == 0.7   # measured: its rate
    found = dearer_by_kind([first, append], True, MB, 33 * MB, over_appends=4.0, source_bytes=13 * MB)
    assert (found.incremental_s, found.full_s, found.switches) == (1.2, 1.0, True)
    whole = dearer_by_kind([first, append], True, MB, 33 * MB, over_appends=4.0)   # 1.2 s against 2.5 s
    assert (whole.cheaper, whole.full_s, whole.tries_full) == ("incremental", 2.5, True)   # within reach: tried


def test_a_view_too_small_for_rates_that_goes_full_by_its_bytes_records_it_as_planned_near_full():
    """Under MIN_WORK no rate is measured and bytes alone decide; when they say full and no
    incremental refresh is measured, the refresh is recorded near_full, so the next change of its
    kind is not read (Nexmark's q8 at 1M bids: 4 MB of work, every change read to switch, 2.0-2.9 s
    against 0.5-0.7 s in full)."""
    small = [Past("full", 3 * MB, 1.5, "FIRST_REFRESH")]

    over = weigh(4 * MB, 3 * MB, small)

    assert (over.incremental_s, over.full_s, over.cheaper, over.near_full) == (None, None, "full", True)
    assert not weigh(int(2.5 * MB), 3 * MB, small).near_full                  # under a full one's bytes: incremental
    measured = [*small, Past("incremental", MB, 0.4, "CHANGES_ONLY", True)]
    assert weigh(4 * MB, 3 * MB, measured).cheaper == "full" and not weigh(4 * MB, 3 * MB, measured).near_full
    recorded = Past(*recent(small, "full", 3 * MB, 1.2, estimate.FULL_CHEAPER, True, 0.6, near_full=True)[-1])
    assert estimate.planned_near_full([*small, recorded], True)                 # the next change: full unread


def test_a_change_that_takes_rows_away_priced_above_full_once_read_sends_the_next_one_full_unread():
    """A view whose appends are measured but whose changes that take rows away never ran
    incrementally prices such a change, once read, at least at its appends' bound; when that says
    full, the refresh is recorded near_full, so the next change of the kind is not read (bench.joins'
    closed_per_minute at 1M bids: every change round read to switch, 3.3-3.5 s against 1.9-2.1 s)."""
    first = Past("full", 12 * MB, 2.0, "FIRST_REFRESH")
    append = Past("incremental", MB, 1.2, "CHANGES_ONLY", False)

    read = weigh(MB, 12 * MB, [first, append], retracts=True)

    assert (read.incremental_s, read.full_s, read.cheaper, read.near_full) == (2.6, 2.0, "full", True)  # 2 x 1.2 s + 1 MB
    unread = dearer_by_kind([first, append], True, MB, 12 * MB, over_appends=2.0)
    assert unread.cheaper == "full" and not unread.near_full                    # before reading: not recorded
    assert not weigh(MB, 12 * MB, [first, append], retracts=False).near_full   # appends price appends
    measured = [first, append, Past("incremental", MB, 3.0, "CHANGES_ONLY", True)]
    assert not weigh(MB, 12 * MB, measured, retracts=True).near_full           # its kind measured: it prices it
    recorded = Past(*recent([first, append], "full", 12 * MB, 3.4, estimate.FULL_CHEAPER, True, 1.4,
                            near_full=read.near_full)[-1])
    assert estimate.planned_near_full([first, append, recorded], True)          # the next change: full unread
