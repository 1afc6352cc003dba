-- Nexmark q5, hot items: bids per auction in 10-minute windows sliding every 5 minutes (HOP).
-- The hottest auction of each window is a top-N per window, which is not kept incrementally:
-- the view keeps every auction's count, and hot_items_peak the highest count per window.
CREATE MATERIALIZED VIEW hot_items
  SCHEDULE EVERY 5 MINUTES
AS SELECT auction, window_start, window_end, count(*) AS bids
   FROM HOP(TABLE(bids), DESCRIPTOR(date_time), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
   GROUP BY auction, window_start, window_end
