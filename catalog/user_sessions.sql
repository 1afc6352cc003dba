-- Nexmark q11, user sessions: each bidder's runs of bids at most 10 minutes apart (SESSION).
-- No watermark: it shows sessions still open too (WATERMARK ... EMIT ON WINDOW CLOSE would keep only closed ones).
CREATE MATERIALIZED VIEW user_sessions
  SCHEDULE EVERY 15 MINUTES
AS SELECT bidder, window_start, window_end, count(*) AS bids, max(price) AS highest
   FROM SESSION(TABLE(bids) PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '10' MINUTES)
   GROUP BY bidder, window_start, window_end
