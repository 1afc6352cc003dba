-- Hot auctions: bids per auction in 10-minute windows sliding every 5 minutes (HOP).
CREATE MATERIALIZED VIEW hot_auctions
  SCHEDULE EVERY 5 MINUTES
AS SELECT window_start, window_end, auction, count(*) AS bids
   FROM HOP(TABLE(demo_bids), DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)
   GROUP BY window_start, window_end, auction
