-- A subscriber key made from now on is stored as a version byte (1) and 32
-- random bytes; HKDF derives from them one key for sealing and another for
-- digests (SubscriberKey). Keys made before stay 32 bytes and keep serving
-- both, so nothing already sealed or digested changes.
ALTER TABLE subscriber_keys DROP CONSTRAINT subscriber_keys_key_check;
ALTER TABLE subscriber_keys ADD CONSTRAINT subscriber_keys_key_check
    CHECK (octet_length(key) = 32 OR (octet_length(key) = 33 AND get_byte(key, 0) = 1));
