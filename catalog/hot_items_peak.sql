-- The rest of Nexmark q5: the highest bid count of each HOP window, read from hot_items (a view
-- reading a view, so deploy and refresh handle hot_items first). The hot items of a window are
-- the hot_items rows with this count. It refreshes when hot_items has changed.
CREATE MATERIALIZED VIEW hot_items_peak
  TRIGGER ON UPDATE AT MOST EVERY INTERVAL '5' MINUTES
AS SELECT window_start, window_end, max(bids) AS top_bids, count(*) AS auctions
   FROM hot_items
   GROUP BY window_start, window_end
