-- An event's id was unique by an index that no statement reads: no read
-- looks an event up by its id, and the append matches the rows it
-- inserted by id within its own statement (sql/0012). The ids are made
-- only by the service (EventIDs: the millisecond and 74 random bits), so
-- two equal ids would take two appends in one millisecond drawing the same
-- 74 bits. The index cost about 30 bytes an event (a 16-byte key, its
-- tuple pointer and page space; `subledger bench --measure storage`) and
-- a fifth index entry to write with each append.
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_event_id_key;
