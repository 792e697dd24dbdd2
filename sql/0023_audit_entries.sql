-- Who read or changed which subscriber (docs/api.md, "Audit"). Written in
-- batches off the request path; pruned past SUBLEDGER_AUDIT_RETENTION.
-- `path` is the route with the subscriber id written {id}: the id is only in
-- `subscriber_id`, the one column erasure rewrites to a pseudonym.
CREATE TABLE audit_entries (
    position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at timestamptz NOT NULL,
    role text NOT NULL,
    key_fingerprint text NOT NULL,
    actor text,
    method text NOT NULL,
    path text NOT NULL,
    subscriber_id text,
    action text NOT NULL,
    status integer NOT NULL
);

-- GET /v1/audit?subscriberId=: one subscriber's entries in position order.
CREATE INDEX audit_entries_subscriber ON audit_entries (subscriber_id, position) WHERE subscriber_id IS NOT NULL;
-- Pruning walks the oldest entries.
CREATE INDEX audit_entries_at ON audit_entries (at);
