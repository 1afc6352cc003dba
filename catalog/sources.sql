-- The demo's sources: a Nexmark-style auction site (people, the auctions they open, the bids on
-- them), as `make demo` (mv/demo.py) generates them. Their change feeds are what refreshes read.
-- Declared with IF NOT EXISTS: deploying again never touches their data.
CREATE TABLE IF NOT EXISTS persons (
  id         BIGINT,
  name       STRING,
  email      STRING,
  city       STRING,
  state      STRING,
  date_time  TIMESTAMP
) USING delta
TBLPROPERTIES (delta.enableChangeDataFeed = true);

CREATE TABLE IF NOT EXISTS auctions (
  id           BIGINT,
  item_name    STRING,
  initial_bid  BIGINT,
  reserve      BIGINT,
  seller       BIGINT,
  category     BIGINT,
  date_time    TIMESTAMP,
  expires      TIMESTAMP
) USING delta
TBLPROPERTIES (delta.enableChangeDataFeed = true);

CREATE TABLE IF NOT EXISTS bids (
  auction    BIGINT,
  bidder     BIGINT,
  price      BIGINT,
  channel    STRING,
  date_time  TIMESTAMP
) USING delta
TBLPROPERTIES (delta.enableChangeDataFeed = true);
