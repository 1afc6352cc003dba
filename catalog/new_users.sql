-- Nexmark q8, new users: people who opened an auction in the same 10-minute window in which
-- they registered. A window join: both sides TUMBLE the same way and join on the window.
CREATE MATERIALIZED VIEW new_users
  SCHEDULE EVERY 10 MINUTES
AS SELECT p.id, p.name, p.window_start, p.window_end, count(*) AS auctions
   FROM TUMBLE(TABLE(persons), DESCRIPTOR(date_time), INTERVAL '10' MINUTES) p
   JOIN TUMBLE(TABLE(auctions), DESCRIPTOR(date_time), INTERVAL '10' MINUTES) a
     ON p.id = a.seller AND p.window_start = a.window_start AND p.window_end = a.window_end
   GROUP BY p.id, p.name, p.window_start, p.window_end
