-- Nexmark q7, highest bid: the top price of each 10-minute window (TUMBLE), each window written
-- once, when the watermark (2 minutes behind the newest bid) has passed its end. A bid up to
-- 10 minutes later than that (GRACE) still updates its window; a later one goes to highest_bid__late.
CREATE MATERIALIZED VIEW highest_bid
  WATERMARK FOR date_time AS date_time - INTERVAL '2' MINUTES
  GRACE INTERVAL '10' MINUTES
  EMIT ON WINDOW CLOSE
  SCHEDULE CRON '*/10 * * * *' AT TIME ZONE 'UTC'
AS SELECT window_start, window_end, max(price) AS highest, count(*) AS bids
   FROM TUMBLE(TABLE(bids), DESCRIPTOR(date_time), INTERVAL '10' MINUTES)
   GROUP BY window_start, window_end
