-- Bids and the highest bid per hour (TUMBLE), each hour written once, when it has closed.
CREATE MATERIALIZED VIEW bids_per_hour
  WATERMARK FOR bidtime AS bidtime - INTERVAL '5' MINUTES
  EMIT ON WINDOW CLOSE
  SCHEDULE CRON '0 * * * *' AT TIME ZONE 'UTC'
AS SELECT window_start, window_end, count(*) AS bids, max(price) AS highest
   FROM TUMBLE(TABLE(demo_bids), DESCRIPTOR(bidtime), INTERVAL '1' HOUR)
   GROUP BY window_start, window_end
