-- A transfer of an original transaction from the owner a decision saw to the
-- restoring subscriber, as one statement that fails (SQLSTATE SL410) when
-- that owner no longer holds it, so the writer's statements can go to the
-- server together in one round trip and the failure still rolls all back.
CREATE FUNCTION transfer_ownership(original text, previous_owner text, new_owner text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE transaction_owners SET subscriber_id = new_owner, claimed_at = now()
    WHERE original_transaction_id = original AND subscriber_id = previous_owner;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'original transaction % is no longer owned by %', original, previous_owner
            USING ERRCODE = 'SL410';
    END IF;
END
$$;
