-- The demo's source: auction bids, as `make demo` (mv/demo.py) generates them into demo_bids.
-- Sources are declared with IF NOT EXISTS: deploying again never touches their data.
CREATE TABLE IF NOT EXISTS demo_bids (
  auction BIGINT,
  bidder  BIGINT,
  price   BIGINT,
  bidtime TIMESTAMP
) USING delta
TBLPROPERTIES (delta.enableChangeDataFeed = true);
