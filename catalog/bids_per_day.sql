-- Bids per day, rolled up from bids_per_hour: a view reading a view, so deploy and refresh
-- handle bids_per_hour first. It refreshes when bids_per_hour has changed, at most once an hour.
CREATE MATERIALIZED VIEW bids_per_day
  TRIGGER ON UPDATE AT MOST EVERY INTERVAL '1' HOUR
AS SELECT window_start, window_end, sum(bids) AS bids, max(highest) AS highest
   FROM TUMBLE(TABLE(SELECT window_start AS hour, bids, highest FROM bids_per_hour),
               DESCRIPTOR(hour), INTERVAL '1' DAY)
   GROUP BY window_start, window_end
