-- A subscriber key made from now on is stored as a version byte (2) and its
-- two keys, one for sealing and one for digests, each 32 random bytes: no
-- key is derived when a subscriber is loaded (SubscriberKey). Keys of
-- version 1 (HKDF material) are rewritten as their two derived keys when
-- the database is prepared (SubscriberKeyConversion), while this table says
-- some may be left; keys made before derivation stay 32 bytes.
ALTER TABLE subscriber_keys DROP CONSTRAINT subscriber_keys_key_check;
ALTER TABLE subscriber_keys ADD CONSTRAINT subscriber_keys_key_check
    CHECK (octet_length(key) = 32
           OR (octet_length(key) = 33 AND get_byte(key, 0) = 1)
           OR (octet_length(key) = 65 AND get_byte(key, 0) = 2));

-- A row while keys of version 1 may be left to convert.
CREATE TABLE subscriber_key_conversion (
    pending boolean PRIMARY KEY DEFAULT true CHECK (pending)
);
INSERT INTO subscriber_key_conversion
    SELECT WHERE EXISTS (SELECT FROM subscriber_keys WHERE octet_length(key) = 33);
