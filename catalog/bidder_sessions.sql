-- Bidder sessions: runs of a bidder's bids at most 10 minutes apart (SESSION).
CREATE MATERIALIZED VIEW bidder_sessions
  SCHEDULE EVERY 15 MINUTES
AS SELECT bidder, window_start, window_end, count(*) AS bids
   FROM SESSION(TABLE(demo_bids) PARTITION BY bidder, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
   GROUP BY bidder, window_start, window_end
